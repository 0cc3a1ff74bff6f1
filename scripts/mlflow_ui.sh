#!/usr/bin/env bash
# The MLflow UI on the project's store (MLFLOW_TRACKING_URI, default mlflow.db), printing the address that opens the
# mwpgen experiment on its runs table: MLflow 3.17.2 otherwise opens an experiment on its GenAI Overview of traces
# (0 here) while the sidebar's "GenAI | Model training" switch is on GenAI, its default in a browser that never set it.
#   bash scripts/mlflow_ui.sh [PORT] [more mlflow ui options]     # PORT default 5000
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
port="${1:-5000}"
shift || true
url="$(python -c 'import sys; from tracking.runs import ui_url; print(ui_url(sys.argv[1]))' "http://127.0.0.1:$port")"
echo "mwpgen runs: $url"
exec mlflow ui --backend-store-uri "$MLFLOW_TRACKING_URI" --host 127.0.0.1 --port "$port" "$@"
