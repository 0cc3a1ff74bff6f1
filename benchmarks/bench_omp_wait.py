"""torch's OpenMP threads spinning (GNU OpenMP's default) or sleeping (OMP_WAIT_POLICY=PASSIVE) while they wait.

    bash scripts/run.sh python -m benchmarks.bench_omp_wait models/evaluator/arithmetic/fold0 --rounds 2

libgomp, which the CPU build of torch uses, lets a thread that waits for the others spin for a while before it
sleeps. On 2 cores that is free while torch has the machine to itself, and costly when something else wants a core:
the evaluate stage parses while the METEOR JVM starts beside it (studies/speed/bench_parse_beside_jvm.py), and the
test suite runs two pytest workers, each with two torch threads. Smoke runs (orchestration/pipeline.py's `stage_env`)
and the suite (tests/conftest.py) set OMP_WAIT_POLICY=PASSIVE; real runs keep the default. Each arm runs in a child
process of its own (libgomp reads the variables when it loads), arms interleaved round by round: libgomp's default,
OMP_WAIT_POLICY=PASSIVE (no spinning) and GOMP_SPINCOUNT=10000 (a thirtieth of the default spin).

- `train step`: a plain SmolLM2 training step alone (batch 8 x 80 tokens, bf16 autocast where the CPU has it; one
  warm-up step, `--steps` timed); its losses must agree across arms (the same arithmetic, only the waiting differs).
- `parse alone`: the evaluator's greedy parse of the first `--n` Arithmetic fold-0 test problems, token by token.
- `parse beside JVM`: the same parse right after a METEOR JVM was launched (the evaluate stage's order).

Prints the median seconds of each workload per arm, and whether the losses and parses agree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.bench_malloc import plain_step, run_arms  # the interleaved child processes, one per arm and round
from benchmarks.machine import cpu_name

ROOT = Path(__file__).resolve().parents[1]
VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
ARMS = {"spin (libgomp's default)": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
        "spin 10k": {"GOMP_SPINCOUNT": "10000"}}  # libgomp's default spins 300,000 times before sleeping


def child(evaluator: Path, n: int, steps: int) -> None:
    import torch

    from mwpgen.data.folds import load_fold
    from mwpgen.device import autocast_dtype
    from mwpgen.evaluation.metrics import TextScorer
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained

    torch.manual_seed(0)
    model, _ = load_model_and_tokenizer(DEFAULT_MODEL, DEFAULT_MODEL_CACHE, device=torch.device("cpu"))
    model.train()
    amp = autocast_dtype(torch.device("cpu"), mixed_precision=True)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    ids = torch.randint(0, model.config.vocab_size, (8, 80))
    out: dict = {"train step": [], "loss": []}
    for i in range(steps + 1):
        start = time.perf_counter()
        loss = plain_step(model, opt, amp, ids)
        if i:  # the first is a warm-up
            out["train step"].append(time.perf_counter() - start)
        out["loss"].append(round(loss, 6))
    del model, opt

    problems = [r["text"] for r in load_fold(ROOT / "data", "arithmetic", 0).test[:n]]
    parser, tokenizer = load_trained(evaluator)
    predict_equations(parser, tokenizer, problems)  # warm-up
    start = time.perf_counter()
    out["parse"] = predict_equations(parser, tokenizer, problems)
    out["parse alone"] = [time.perf_counter() - start]
    scorer = TextScorer()
    scorer.start()
    start = time.perf_counter()
    beside = predict_equations(parser, tokenizer, problems)
    out["parse beside JVM"] = [time.perf_counter() - start]
    out["parse"] = out["parse"] if beside == out["parse"] else None  # disagreeing parses show below
    scorer.close()
    print(json.dumps(out))


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("evaluator", type=Path, help="a trained evaluator (models/evaluator/<dataset>/fold<k>)")
    cli.add_argument("--rounds", type=int, default=2, help="child processes per arm, interleaved")
    cli.add_argument("--steps", type=int, default=4, help="timed training steps per child")
    cli.add_argument("--n", type=int, default=8, help="test problems per parse (8: the smoke profile's when measured)")
    cli.add_argument("--arms", nargs="+", choices=list(ARMS), help="only these arms (default: all)")
    cli.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = cli.parse_args()
    if args.child:
        child(args.evaluator, args.n, args.steps)
        return
    base = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    arms = {name: {**base, **extra} for name, extra in ARMS.items() if not args.arms or name in args.arms}
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_omp_wait",
        str(args.evaluator),
        "--child",
        "--steps",
        str(args.steps),
        "--n",
        str(args.n),
    ]
    runs = run_arms(cmd, arms, args.rounds)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} CPUs, torch threads: torch's default; {args.rounds} processes per arm, "
          f"interleaved; seconds (median over processes and steps)")
    for workload in ("train step", "parse alone", "parse beside JVM"):
        print(f"  {workload:17s}" + "".join(
            f"  {name}: {statistics.median(s for r in rs for s in r[workload]):6.2f}" for name, rs in runs.items()))
    every = [r for rs in runs.values() for r in rs]
    print("losses agree across arms:", len({tuple(r["loss"]) for r in every}) == 1,
          "| parses agree across arms:", len({tuple(r["parse"]) for r in every}) == 1)


if __name__ == "__main__":
    main()
