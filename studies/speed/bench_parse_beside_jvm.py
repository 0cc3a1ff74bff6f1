"""The evaluator's parse while the METEOR JVM starts beside it, at 2 and 1 torch threads (issue 22's smoke run).

    bash scripts/run.sh python -m studies.speed.bench_parse_beside_jvm models/evaluator/arithmetic/fold0 \
        --n 8 --repeats 3

The evaluate stage starts the METEOR JVM first so that it loads while the evaluator parses (flows/evaluate.py). On
2 cores, torch's two OpenMP threads then share the CPU with the JVM's start. Each arm parses the first `--n` test
problems of Arithmetic fold 0 greedily (mwpgen.lm.decoding.predict_equations, as the stage does), alone or right
after a METEOR JVM was launched (mwpgen.evaluation.metrics.TextScorer), with 2 or 1 torch threads; arms interleave,
`--repeats` rounds, after one warm-up parse. Prints seconds per parse, and the parses of every arm (they must agree).
"""

import argparse
import statistics
import time
from pathlib import Path

import torch

from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import TextScorer
from mwpgen.lm.decoding import predict_equations
from mwpgen.lm.loading import load_trained

ROOT = Path(__file__).resolve().parents[1]

ARMS = [("alone", 2), ("alone", 1), ("beside JVM start", 2), ("beside JVM start", 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evaluator", type=Path, help="a trained evaluator (models/evaluator/<dataset>/fold<k>)")
    parser.add_argument("--n", type=int, default=8, help="test problems parsed per arm (the smoke profile: 8)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    problems = [r["text"] for r in load_fold(ROOT / "data", "arithmetic", 0).test[: args.n]]
    model, tokenizer = load_trained(args.evaluator)
    predict_equations(model, tokenizer, problems)  # warm-up
    seconds: dict[tuple[str, int], list[float]] = {arm: [] for arm in ARMS}
    parses: dict[tuple[str, int], list[str]] = {}
    for _ in range(args.repeats):
        for where, threads in ARMS:
            torch.set_num_threads(threads)
            scorer = TextScorer() if where != "alone" else None
            if scorer:
                scorer.start()
            start = time.perf_counter()
            parses[(where, threads)] = predict_equations(model, tokenizer, problems)
            seconds[(where, threads)].append(time.perf_counter() - start)
            if scorer:
                scorer.close()
    print(f"{args.n} problems, {args.evaluator}; seconds per parse (median of {args.repeats}; every run)")
    for (where, threads), runs in seconds.items():
        print(f"  {where:17s} {threads} thread{'s' if threads > 1 else ' '}  {statistics.median(runs):6.2f}   "
              + " ".join(f"{s:.2f}" for s in runs))
    agree = len({tuple(p) for p in parses.values()}) == 1
    print("parses agree across arms:", agree)


if __name__ == "__main__":
    main()
