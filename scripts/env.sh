# Offline-safe, quiet settings for every mwpgen command. Sourced by scripts/run.sh; safe to source by hand.
_mwpgen_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export MWPGEN_HOME="$_mwpgen_root"
export PREFECT_HOME="${PREFECT_HOME:-$_mwpgen_root/.prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export DO_NOT_TRACK="${DO_NOT_TRACK:-1}"  # Prefect's client-side (SDK) telemetry off too
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="${PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS:-90}"
export PREFECT_LOGGING_LEVEL="${PREFECT_LOGGING_LEVEL:-INFO}"
export MLFLOW_DISABLE_TELEMETRY=true
# Absolute: a relative sqlite URI would be lost under `dvc exp run --temp`.
export MLFLOW_TRACKING_URI="${MLFLOW_TRACKING_URI:-sqlite:///$_mwpgen_root/mlflow.db}"
export DVC_NO_ANALYTICS=1
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"
export TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1
# glibc hands every freed block above its mmap threshold back to the OS and faults it in again on the next
# allocation; a training step frees and reallocates its activations (a logits tensor alone is 200 MB), and on these
# virtual machines a page fault has measured 3-13 us. Keeping freed memory in the heap changes no result, only the
# time (benchmarks/bench_malloc.py, studies/malloc/README.md).
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-4294967296}"
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-68719476736}"
if [ -d "$_mwpgen_root/.venv" ]; then
  export VIRTUAL_ENV="$_mwpgen_root/.venv"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
fi
unset _mwpgen_root
