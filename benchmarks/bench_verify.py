"""Verified generation (`mwpgen generate --verify K`), seconds per problem after loading: this tree against another
checkout of the project, side by side, and whether the two show the same problems.

    python -m benchmarks.bench_verify models/ours/arithmetic/fold0 --judge models/judge/arithmetic/fold0 \
        --requests studies/verify_k/ours_rft_gated/verify_k_generations.csv --n 12 --k 32 --vs ../mwpgen-old

Each arm is one long-lived worker process (this tree's code, or the checkout's: `import mwpgen` resolves inside it)
that loads the model once and answers requests read from its stdin through mwpgen.generate.service, as the CLI
does. The requests are the first `--n` rows of a CSV with `equation` and `context` columns (verify_k's generations
file is one), seed = row index. They alternate A B, B A, ... one request at a time, so the machine's drift hits both
alike; the idle worker waits on its stdin. Printed: each arm's median and mean seconds per problem, their ratio,
and how many requests got the same shown problem, verdict, judge probability and log-likelihood in both.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.machine import describe

# Runs inside each checkout: only the public Service/Request API both sides share.
WORKER = r"""
import json, sys, time
from mwpgen.generate.request import Request
from mwpgen.generate.service import Service
model, judge = sys.argv[1], sys.argv[2] or None
service = Service.load(model, "cpu", judge)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    r = json.loads(line)
    request = Request(equation=r["equation"], context=tuple(r["context"].split()), given=r["equation"], n=1,
                      seed=r["seed"], verify=r["k"], decoding="top_p", top_p=0.9, temperature=1.0,
                      max_new_tokens=80)
    began = time.perf_counter()
    (p,) = service.answer(request)
    print(json.dumps({"seconds": time.perf_counter() - began, "text": p.masked_text, "verified": p.verified,
                      "p": p.judge_probability, "ll": p.log_likelihood}), flush=True)
"""


class Worker:
    def __init__(self, tree: Path, model: str, judge: str):
        env = os.environ | {"PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, model, judge], cwd=tree, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.read()

    def read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"error: a worker ended early (exit {self.proc.wait()})")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a bundle folder (absolute, or relative to each tree)")
    ap.add_argument("--judge", default="", help="a learned judge folder (default: the rule)")
    ap.add_argument("--requests", type=Path, required=True, help="CSV with equation and context columns")
    ap.add_argument("--n", type=int, default=12, help="requests (the CSV's first rows)")
    ap.add_argument("--k", type=int, default=32, help="candidates per request (--verify K)")
    ap.add_argument("--vs", type=Path, required=True, help="the other checkout (arm B)")
    args = ap.parse_args(argv)
    with open(args.requests, newline="", encoding="utf-8") as f:
        rows = [r for _, r in zip(range(args.n), csv.DictReader(f))]
    here = Path(__file__).resolve().parents[1]
    arms = {"this tree": Worker(here, args.model, args.judge), str(args.vs): Worker(args.vs.resolve(), args.model,
                                                                                     args.judge)}
    names = list(arms)
    out: dict[str, list[dict]] = {name: [] for name in names}
    for seed, row in enumerate(rows):
        request = {"equation": row["equation"], "context": row["context"], "seed": seed, "k": args.k}
        for name in names if seed % 2 == 0 else names[::-1]:
            out[name].append(arms[name].ask(request))
    for worker in arms.values():
        worker.close()
    a, b = (out[name] for name in names)
    print(f"machine: {describe()}")
    print(f"{len(rows)} requests at K = {args.k}, model {args.model}, judge {args.judge or 'the rule'}")
    for name in names:
        s = [r["seconds"] for r in out[name]]
        print(f"{name:>24}: median {statistics.median(s):6.2f} s, mean {statistics.mean(s):6.2f} s a problem")
    ratio = statistics.median(x["seconds"] / y["seconds"] for x, y in zip(a, b))
    print(f"this tree / {names[1]}: x{ratio:.3f} (median of per-request ratios)")
    same = sum(x["text"] == y["text"] and x["verified"] == y["verified"] and x["p"] == y["p"] for x, y in zip(a, b))
    same_ll = sum(abs(x["ll"] - y["ll"]) < 1e-3 for x, y in zip(a, b))
    print(f"same shown problem, verdict and p: {same} of {len(rows)}; log-likelihood within 0.001: {same_ll}")


if __name__ == "__main__":
    main()
