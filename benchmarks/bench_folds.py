"""Fold runs fanned out over Prefect workers: wall time of the same 2-fold run with 1 worker and with 2.

The scenario of tests/pipeline/test_folds.py (tests/helpers/fold_scenario.py: a tiny model, synthetic Arithmetic folds 0
and 1, a local-folder DVC remote, a process work pool), built from scratch for each worker count with its own Prefect
server, so neither run reuses the other's outputs; `python -m orchestration.fan_out --concurrency 2` is timed from
submission to the report.

    python -m benchmarks.bench_folds --out benchmarks/results/bench_folds.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from orchestration.prefect_api import pointed_server
from tests.helpers.fold_scenario import FOLDS, cluster


def timed_run(n_workers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench-folds-{n_workers}-") as tmp:
        root = Path(tmp)
        (root / "prefect").mkdir()
        with pointed_server(root / "prefect", ui=False), cluster(root / "scenario", n_workers) as c:
            start = time.perf_counter()
            proc = c.submit(concurrency=2)
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"the {n_workers}-worker run failed:\n{proc.stdout[-3000:]}\n{c.worker_logs()}")
    return {"workers": n_workers, "folds": len(FOLDS), "wall_s": round(wall, 1)}


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = cli.parse_args()
    runs = [timed_run(n) for n in (1, 2)]
    result = {"runs": runs, "speedup_2_vs_1": round(runs[0]["wall_s"] / runs[1]["wall_s"], 2),
              "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine()}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    for r in runs:
        print(f"{r['workers']} worker(s): {r['folds']} folds in {r['wall_s']:.1f} s")
    print(f"2 workers vs 1: x{result['speedup_2_vs_1']}")


if __name__ == "__main__":
    main()
