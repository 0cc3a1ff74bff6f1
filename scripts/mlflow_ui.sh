#!/usr/bin/env bash
# The MLflow UI on the project's store (MLFLOW_TRACKING_URI, default mlflow.db). It prints the address that opens the
# mwpgen experiment on its runs table once the server answers (its /health endpoint; ~30 s on a 2-core machine), not
# before: MLflow 3.17.2 otherwise opens an experiment on its GenAI Overview of traces (0 here) while the sidebar's
# "GenAI | Model training" switch is on GenAI, its default in a browser that never set it (tracking/runs.py ui_url).
# A fresh clone's store is empty: `python -m tracking.reference_run` logs the committed run into it first.
#   bash scripts/mlflow_ui.sh [PORT] [more mlflow ui options]     # PORT default 5000
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
port="${1:-5000}"
shift || true
base="http://127.0.0.1:$port"
mlflow ui --backend-store-uri "$MLFLOW_TRACKING_URI" --host 127.0.0.1 --port "$port" "$@" &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT  # the server ends with this script
trap 'exit 130' INT TERM
echo "starting the MLflow UI on $base (the link follows when it answers) ..."
until python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$base" \
    2>/dev/null; do
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server" || exit $?   # the server stopped before answering (a port in use, a bad store): its message is above
    exit 1
  fi
  sleep 1
done
echo "mwpgen runs: $(python -c 'import sys; from tracking.runs import ui_url; print(ui_url(sys.argv[1]))' "$base")"
wait "$server"
