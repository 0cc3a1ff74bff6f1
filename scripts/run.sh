#!/usr/bin/env bash
# Run a command inside the project's venv with the offline-safe settings of scripts/env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
exec "$@"
