#!/usr/bin/env bash
# The smoke profile from a fresh clone of this checkout, twice in a row: DVC's cache by copy (as committed), then by
# hardlink (`dvc config --local cache.type hardlink,symlink` in the clone). Run with nothing else on the CPU:
#   MWPGEN_MIRROR=../shared/data/raw bash bench/smoke_ab.sh      (docs/stage_overhead.md)
repo=$(cd "$(dirname "$0")/.." && pwd)
for arm in copy hardlink; do
  d=$(mktemp -d)/smoke_$arm
  start=$(date +%s.%N)
  git clone -q "$repo" "$d" && cd "$d" && ln -s "$repo/.venv" .venv
  [ $arm = hardlink ] && .venv/bin/dvc config --local cache.type hardlink,symlink
  bash scripts/run.sh python -m orchestration.pipeline --profile smoke --no-push > "$repo/smoke_$arm.log" 2>&1
  rc=$?
  echo "$arm: exit $rc, $(echo "$(date +%s.%N) - $start" | bc) s from the clone (log: smoke_$arm.log)"
  cd /; rm -rf "$d"
done
