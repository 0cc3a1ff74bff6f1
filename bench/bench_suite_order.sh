#!/usr/bin/env bash
# The suite from a fresh clone of this checkout in two orders, alternating for ROUNDS rounds (default 1): xdist's
# default (modules with the most tests first, which leaves the two whole-pipeline modules to the end) and the
# project's (tests/conftest.py: LONGEST_FIRST, then collection order). Run with nothing else on the CPU:
#   MWPGEN_MIRROR=../shared/data/raw bash bench/bench_suite_order.sh [ROUNDS]
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
git clone -q "$repo" "$work/clone" && cd "$work/clone" && ln -s "$repo/.venv" .venv || exit 1
for round in $(seq "${1:-1}"); do
  for arm in most-tests-first longest-first; do
    order=--no-loadscope-reorder
    [ $arm = most-tests-first ] && order=--loadscope-reorder  # the later flag wins over addopts'
    start=$(date +%s.%N)
    bash scripts/run.sh python -m pytest -q -p no:cacheprovider $order > "$work/$arm.$round.log" 2>&1
    rc=$?
    echo "round $round, $arm: exit $rc, $(echo "$(date +%s.%N) - $start" | bc) s; $(tail -1 "$work/$arm.$round.log")"
  done
done
