"""Record, no longer runnable: `orchestration/parallel_repro.py` was removed (its plan used DVC internals); check out
commit 008ddf3 to rerun it. The pipeline runs plain `dvc repro` (studies/speed/README.md).

What DVC itself costs per stage, one `dvc repro` for the whole run against one `dvc repro --single-item` per stage
(orchestration/parallel_repro.py), and what running stages side by side gains, on stages that do no work.

A scratch DVC project (in git, with autostage, as this project) of N stages whose command is a `cat`: a chain (each
stage depends on the one before: nothing can run side by side) and a fan (N independent stages). Arms, interleaved,
each on a fresh copy:

    whole      `dvc repro` (the pipeline before)
    jobs=1     parallel_repro.plan + run, one stage at a time
    jobs=2     the same, two at a time

    bash scripts/run.sh python -m studies.speed.bench_parallel_repro [--stages 8] [--rounds 3]

Prints the median wall seconds per arm and shape, and per stage.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestration.parallel_repro import dvc_repro, plan, run

ROOT = Path(__file__).resolve().parents[1]


def _sh(cwd: Path, *cmd: str) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)


def project(where: Path, stages: int, shape: str) -> Path:
    where.mkdir()
    _sh(where, "git", "init", "-q")
    _sh(where, sys.executable, "-m", "dvc", "init", "-q")
    _sh(where, sys.executable, "-m", "dvc", "config", "core.autostage", "true")
    lines = ["stages:"]
    for i in range(stages):
        dep = f"s{i - 1}.txt" if shape == "chain" and i else "seed.txt"
        lines += [f"  s{i}:", f"    cmd: cat {dep} > s{i}.txt", f"    deps: [{dep}]", f"    outs: [s{i}.txt]"]
    (where / "dvc.yaml").write_text("\n".join(lines) + "\n")
    (where / "seed.txt").write_text("seed\n")
    return where


def timed(arm: str, repo: Path, env: dict) -> float:
    start = time.perf_counter()
    if arm == "whole":
        _sh(repo, sys.executable, "-m", "dvc", "repro", "-q")
    else:
        outcome = run(plan(repo), dvc_repro(), cwd=repo, env=env, jobs=int(arm.split("=")[1]), out=io.StringIO())
        assert outcome.ok, outcome
    return time.perf_counter() - start


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--stages", type=int, default=8)
    cli.add_argument("--rounds", type=int, default=3)
    args = cli.parse_args()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    arms = ["whole", "jobs=1", "jobs=2"]
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        templates = {shape: project(Path(tmp) / shape, args.stages, shape) for shape in ("chain", "fan")}
        for r in range(args.rounds):
            for shape, template in templates.items():
                for arm in arms if r % 2 == 0 else arms[::-1]:
                    repo = Path(tmp) / f"{shape}-{arm}-{r}"
                    shutil.copytree(template, repo)
                    times.setdefault((shape, arm), []).append(timed(arm, repo, env))
                    print(f"round {r} {shape:5s} {arm:6s} {times[shape, arm][-1]:6.2f} s", flush=True)
    print(f"\n{args.stages} stages doing nothing, median of {args.rounds} (s): run, per stage")
    for (shape, arm), values in times.items():
        median = statistics.median(values)
        print(f"  {shape:5s} {arm:6s} {median:6.2f}  {median / args.stages:5.2f}")


if __name__ == "__main__":
    main()
