#!/usr/bin/env bash
# The smoke profile from a fresh clone of this checkout, twice in a row: DVC's cache by copy (as committed), then by
# hardlink (`dvc config --local cache.type hardlink,symlink` in the clone). Run with nothing else on the CPU:
#   MWPGEN_MIRROR=../shared/data/raw bash studies/speed/smoke_ab.sh      (studies/stage_overhead/README.md)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
for arm in copy hardlink; do
  clone=$work/smoke_$arm
  start=$(date +%s.%N)
  # a failed clone must stop here: the pipeline below would otherwise run in the caller's checkout
  git clone -q "$repo" "$clone" && cd "$clone" && ln -s "$repo/.venv" .venv || exit 1
  if [ $arm = hardlink ]; then .venv/bin/dvc config --local cache.type hardlink,symlink || exit 1; fi
  bash scripts/run.sh python -m orchestration.pipeline --profile smoke --no-push > "$work/smoke_$arm.log" 2>&1
  rc=$?
  echo "$arm: exit $rc, $(echo "$(date +%s.%N) - $start" | bc) s from the clone (log: $work/smoke_$arm.log)"
  cd "$work" && rm -rf "$clone"
done
