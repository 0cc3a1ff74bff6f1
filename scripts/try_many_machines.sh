#!/usr/bin/env bash
# docs/many_machines.md, followed on this one machine: a Prefect server, a process pool, two workers in
# their own clones, a local-folder remote, the tiny two-fold scenario of tests/helpers/fold_scenario.py; then a fresh clone
# of the committed result pulls it. Usage: bash scripts/try_many_machines.sh [scratch folder]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
R="${1:-/tmp/mwpgen-many-machines}"; rm -rf "$R"; mkdir -p "$R"
cd "$ROOT" && . scripts/env.sh
python - "$R" <<'PY'
import sys
from pathlib import Path
from tests.helpers.fold_scenario import base_project  # run from the project root: it is on sys.path
base_project(Path(sys.argv[1]), Path(sys.argv[1]) / "remote")
PY
for c in submit worker1 worker2; do git clone -q $R/base $R/$c && ln -s "$ROOT/.venv" $R/$c/.venv; done
cd $R/submit && . scripts/env.sh
export PREFECT_HOME=$R/prefect-server
prefect server start --host 127.0.0.1 --port 4300 > $R/server.log 2>&1 &
SERVER=$!
export PREFECT_API_URL=http://127.0.0.1:4300/api MLFLOW_TRACKING_URI=sqlite:///$R/mlflow.db
for i in $(seq 60); do curl -sf $PREFECT_API_URL/health >/dev/null && break; sleep 1; done
echo '$ prefect work-pool create mwpgen-local --type process'
prefect work-pool create mwpgen-local --type process 2>&1 | tail -3
echo '$ prefect --no-prompt deploy --name mwpgen-fold'
prefect --no-prompt deploy --name mwpgen-fold 2>&1 | grep -v "^\s*$" | tail -6
for w in worker1 worker2; do
  (cd $R/$w && unset PREFECT_HOME MWPGEN_HOME && setsid bash scripts/run.sh prefect worker start --pool mwpgen-local --limit 1 > $R/$w.log 2>&1 &)
done
echo '$ bash scripts/run.sh python -m orchestration.fan_out --concurrency 4'
start=$(date +%s)
if bash scripts/run.sh python -m orchestration.fan_out --concurrency 4 > $R/folds.log 2>&1; then rc=0; else rc=$?; fi
echo "rc=$rc in $(( $(date +%s) - start )) s"
grep -E "fold [0-9]: done|Running stage|files pushed|files fetched|error" $R/folds.log | cut -c1-160 | head -20
pkill -f "prefect worker start --pool mwpgen-local" || true
echo '$ git clone <repo> fresh && dvc pull && dvc status   (after committing the result in submit)'
cd $R/submit && git add -A && git -c user.name=t -c user.email=t@t commit -qm results
echo "committed: $(git show --stat --format= HEAD | tail -1)"
git clone -q $R/submit $R/fresh
ln -s "$ROOT/.venv" $R/fresh/.venv
cd $R/fresh
. scripts/env.sh
dvc pull 2>&1 | tail -1
dvc status
kill $SERVER
