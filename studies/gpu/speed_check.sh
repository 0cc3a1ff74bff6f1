#!/usr/bin/env bash
# Issue 48's GPU check, run on a lent GPU machine in four calls to one warm machine (studies/gpu/README.md): one call
# carries at most 64 MiB with the repository (23 MiB), so the SmolLM2 GGUF (94 MiB) travels in thirds and the
# project's transformers (the image's is older) in the first call. Call n+1 must follow call n within the machine's
# 30 s of idle warmth, or the parts already sent are lost.
#
#   bash studies/gpu/speed_check.sh 1   # carry .gpu/common .gpu/transformers: the bench with limits, batch 8 and 64
#   bash studies/gpu/speed_check.sh 2   # carry .gpu/gguf_1: a plain step compiled as CUDA graphs, batch 8 and 64
#   bash studies/gpu/speed_check.sh 3   # carry .gpu/gguf_2
#   bash studies/gpu/speed_check.sh 4   # carry .gpu/gguf_3: the default profile's ours trained, its wall time
#
# .gpu/ (ignored): common/ (wheels of pydantic, pydantic-core, annotated-types, typing-inspection, ruamel.yaml, gguf,
# typing_extensions for Python 3.12; spaCy's stopword list as JSON; SmolLM2's config and tokenizer; the Arithmetic
# data: processed, splits, keywords), transformers/ (its 5.24.0 wheel), gguf_1..3/part (the GGUF cut in thirds).
# Calls 1 and 2 time a randomly initialised SmolLM2-135M (the same shapes; only the weights differ, so the writer runs
# to its token cap); call 4 the real weights. Everything lands in $OUT (studies/gpu/speed-check here).
set -uo pipefail
part=$1
export PYTHONUNBUFFERED=1
keep=/tmp/mwpgen-gpu
mkdir -p "$keep"
[ -d .gpu/common ] && cp -r .gpu/common "$keep/"
for i in 1 2 3; do [ -f ".gpu/gguf_$i/part" ] && cp ".gpu/gguf_$i/part" "$keep/gguf_part_$i"; done
if [ ! -d /tmp/site/pydantic ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$keep"/common/whl/*.whl || exit 1
fi
# the project's transformers (the image's is older: its model outputs lack `.cache`)
[ -d .gpu/transformers ] && cp -r .gpu/transformers "$keep/"
if [ ! -d /tmp/site/transformers ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$keep"/transformers/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
# mwpgen reads spaCy's stopword list alone; a bare GPU machine has no spaCy: the same list stands in for that module
if ! python3 -c "import spacy" 2>/dev/null && [ ! -f /tmp/site/spacy/lang/en/stop_words.py ]; then
  mkdir -p /tmp/site/spacy/lang/en && touch /tmp/site/spacy/__init__.py /tmp/site/spacy/lang/__init__.py \
    /tmp/site/spacy/lang/en/__init__.py
  echo "import json; STOP_WORDS = set(json.load(open('$keep/common/stop_words.json')))" \
    > /tmp/site/spacy/lang/en/stop_words.py
fi
log() { tee -a "$OUT/part$part.log"; }
random_model=/tmp/smollm2-random
if [ ! -f "$random_model/model.safetensors" ]; then
  python3 - "$keep/common/smollm2" "$random_model" <<'EOF'
import sys
from pathlib import Path
from mwpgen.lm.loading import atomic_save_pretrained, load_model_and_tokenizer
source, out = sys.argv[1:]
atomic_save_pretrained(*load_model_and_tokenizer(source, pretrained=False, seed=0), Path(out))
EOF
fi
case $part in
1)
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  } 2>&1 | log
  for batch in 8 64; do
    arms=()  # every arm at the default profile's batch; at 64 the arms ours trains with
    [ "$batch" = 8 ] || arms=(--arms phase1 phase2 phase2-teacher-forced)
    echo "=== bench_joint_step batch $batch" | log
    timeout 300 python3 -m benchmarks.bench_joint_step --model "$random_model" --device cuda --steps 5 \
      --batch "$batch" --seq 128 "${arms[@]}" 2>&1 | grep -v Warning | log
  done ;;
2)
  for batch in 8 64; do
    echo "=== bench_compile reduce-overhead, fused AdamW, batch $batch" | log
    timeout 200 python3 -m studies.speed.bench_compile --model "$random_model" --device cuda --mode reduce-overhead \
      --fused-adam --steps 10 --batch "$batch" --lengths 128 2>&1 | grep -v Warning | log
  done ;;
3) echo "second third of the GGUF kept" | log ;;
4)
  gguf=/tmp/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
  mkdir -p /tmp/gguf
  cat "$keep"/gguf_part_1 "$keep"/gguf_part_2 "$keep"/gguf_part_3 > "$gguf" && sha256sum "$gguf" | log
  python3 -c "
from pathlib import Path
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, convert_gguf
convert_gguf(Path('$gguf'), DEFAULT_MODEL_CACHE / 'smollm2-135m-instruct')" 2>&1 | tail -3 | log
  echo "=== the default profile's ours (params.yaml), Arithmetic fold 0" | log
  timeout 560 python3 -m studies.gpu.gpu_default_profile train --out "$OUT" --generators ours \
    --evaluator-metrics metrics/train/evaluator/arithmetic/fold0.json --data "$keep/common/data" \
    --stop-words "$keep/common/stop_words.json" 2>&1 | grep -v Warning | log ;;
esac
