"""Does sampling under the rule's surface checks (mwpgen/generate/surface_constraint.py) give `--verify K` more
candidates worth judging, and a shown problem that is right more often? Measured on validation equations (they may
choose), each request answered twice with the same seed: as `mwpgen generate` does now, and constrained.

    python -m studies.surface_constraint.compare sample models/ours-rft/arithmetic/fold0 \
        --judge models/judge/arithmetic/fold0 --n 100 --k 32 --out studies/surface_constraint
    python -m studies.surface_constraint.compare build studies/surface_constraint   # the shown problems, blind
    python -m studies.surface_constraint.compare score studies/surface_constraint   # after reading

`sample` writes <out>/shown.csv (per arm and equation: the shown problem, its verdict and p, seconds) and
<out>/pools.json (per arm: the share of candidates passing the surface checks, the judge's mean p over them, the share
of requests with a verified problem, seconds per request). `build` makes one blind reading set of both arms' shown
problems, shuffled together (readers see equation and problem only; data/labels/evaluator/README.md's rule), in
<out>/reading. `score` reports each arm's shown problems read right and the constrained minus the plain one with a
paired 95% bootstrap interval, and the precision of "verified: yes" in each.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
ARMS = ("plain", "constrained")
SHOWN = ["arm", "id", "equation", "shape", "context", "generated", "verified", "judge_probability", "seconds"]
KEY = ["arm", "id", "verified"]
RESAMPLES = 1000


def sample(args: argparse.Namespace) -> None:
    from mwpgen.config.schema import load_params
    from mwpgen.data.equation_shapes import equation_shape
    from mwpgen.data.folds import load_fold
    from mwpgen.device import resolve_device
    from mwpgen.generate.request import Request
    from mwpgen.judge.rule import surface_checks
    from studies.verify_k.verify_k import fold_contexts, load_service

    service, selector = load_service(args.bundle, args.judge, resolve_device(args.device))
    judge, tokenizer, settings = service.judge, service.tokenizer, service.settings
    exp = load_params(args.params).experiment
    records = load_fold(args.data, args.dataset, args.fold, seed=exp.seed,
                        validation_size=exp.validation_size).validation
    records = random.Random(f"{args.seed}:surface:validation").sample(records, min(args.n, len(records)))
    contexts = fold_contexts(selector, settings, tokenizer, records, args.dataset, args.fold)
    shown, pools = [], {arm: {"candidates": 0, "surface": 0, "judge_p": [], "verified": 0,
                              "seconds": 0.0} for arm in ARMS}
    for i, (record, context) in enumerate(zip(records, contexts)):
        for arm in ARMS:
            service.surface_constraint = arm == "constrained"
            request = Request(equation=record["equation"], context=context, given=record["equation"], n=1,
                              seed=args.seed + i, verify=args.k, decoding="top_p", top_p=args.top_p,
                              temperature=args.temperature, max_new_tokens=args.max_new_tokens)
            began = time.perf_counter()
            texts = service.candidates(request, service.prompt(request))
            service.candidates = lambda *a, texts=texts, **k: texts  # answer() ranks this very pool: decoded once
            try:
                (problem,) = service.answer(request, i)
            finally:
                del service.candidates
            seconds = time.perf_counter() - began
            checks = [surface_checks(record["equation"], t) for t in texts]
            pool = pools[arm]
            pool["candidates"] += len(texts)
            pool["surface"] += sum(c["numbers_once"] and not c["extra_numbers"] and c["question"] for c in checks)
            if judge is not None:
                pool["judge_p"] += judge.probabilities(texts, [record["equation"]] * len(texts))
            pool["verified"] += bool(problem.verified)
            pool["seconds"] += seconds
            shown.append({"arm": arm, "id": record["id"], "equation": record["equation"],
                          "shape": equation_shape(record["equation"]), "context": " ".join(context),
                          "generated": problem.masked_text, "verified": problem.verified,
                          "judge_probability": problem.judge_probability, "seconds": round(seconds, 3)})
        print(f"{i + 1}/{len(records)} equations", file=sys.stderr, flush=True)
    n = len(records)
    summary = {"n": n, "k": args.k, "bundle": str(args.bundle), "judge": str(args.judge), "arms": {
        arm: {"candidates_per_request": p["candidates"] / n, "surface_share": p["surface"] / max(p["candidates"], 1),
              "judge_p_mean": float(np.mean(p["judge_p"])) if p["judge_p"] else None,
              "verified_share": p["verified"] / n, "seconds_per_request": p["seconds"] / n}
        for arm, p in pools.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    blind_reading.write_rows(args.out / "shown.csv", shown, SHOWN)
    (args.out / "pools.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


def build(out: Path) -> None:
    blind_reading.build(out / "reading", blind_reading.rows(out / "shown.csv"), KEY, prefix="s")


def score(out: Path) -> dict:
    key, first, second = blind_reading.labels(out / "reading")
    read = {(r["arm"], r["id"]): first[r["uid"]] for r in key}
    verified = {(r["arm"], r["id"]): r["verified"] == "True" for r in key}
    ids = sorted({i for _, i in read})
    matrix = np.array([[read[(arm, i)] for arm in ARMS] for i in ids], dtype=float)
    rng = np.random.default_rng(blind_reading.SEED)
    boot = matrix[rng.integers(0, len(ids), size=(RESAMPLES, len(ids)))].mean(axis=1)
    diff = boot[:, 1] - boot[:, 0]
    arms = {}
    for j, arm in enumerate(ARMS):
        accepted = [read[(arm, i)] for i in ids if verified[(arm, i)]]
        arms[arm] = {"read_right": float(matrix[:, j].mean()),
                     "read_right_95ci": [float(x) for x in np.percentile(boot[:, j], [2.5, 97.5])],
                     "verified": len(accepted), "verified_right": int(sum(accepted))}
    agree = sum(first[u] == y for u, y in second.items())
    result = {"n": len(ids), "overlap": len(second), "overlap_agree": agree, "arms": arms,
              "constrained_minus_plain": {"mean": float(matrix[:, 1].mean() - matrix[:, 0].mean()),
                                          "low": float(np.percentile(diff, 2.5)),
                                          "high": float(np.percentile(diff, 97.5))}}
    d = result["constrained_minus_plain"]
    lines = [f"Shown problems of {len(ids)} validation equations, read blind (overlap {agree} of {len(second)} agree).",
             "", "| arm | read right [95% CI] | verified: right of |", "|---|---:|---:|"]
    for arm, a in arms.items():
        lo, hi = a["read_right_95ci"]
        lines.append(f"| {arm} | {100 * a['read_right']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}] | "
                     f"{a['verified_right']} of {a['verified']} |")
    lines += ["", f"constrained − plain: {100 * d['mean']:+.0f} points [{100 * d['low']:+.0f}, {100 * d['high']:+.0f}]"]
    shape = {r["id"]: r["shape"] for r in blind_reading.rows(out / "shown.csv")}
    result["by_shape"] = {}
    for s in sorted(set(shape.values())):
        rows_of = [k for k, i in enumerate(ids) if shape[i] == s]  # matrix rows of this shape's equations
        right = {arm: int(matrix[rows_of, j].sum()) for j, arm in enumerate(ARMS)}
        result["by_shape"][s] = {"n": len(rows_of), **right}
    lines += ["", "Read right by equation shape:", "", "| shape | equations | " + " | ".join(ARMS) + " |",
              "|---|---:|" + "---:|" * len(ARMS)]
    lines += [f"| {s} | {b['n']} | " + " | ".join(str(b[arm]) for arm in ARMS) + " |"
              for s, b in result["by_shape"].items()]
    return blind_reading.write_report(out / "reading", result, lines)


def main(argv=None) -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("command", choices=("sample", "build", "score"))
    cli.add_argument("bundle_or_out", type=Path, help="sample: the model (bundle or MLflow model folder); build, "
                     "score: the study's folder")
    cli.add_argument("--judge", type=Path, help="the learned judge --verify uses (default: the rule)")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--data", type=Path, default=ROOT / "data")
    cli.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    cli.add_argument("--n", type=int, default=100, help="validation equations (seeded draw)")
    cli.add_argument("--k", type=int, default=32)
    cli.add_argument("--seed", type=int, default=2021)
    cli.add_argument("--top-p", type=float, default=0.9)
    cli.add_argument("--temperature", type=float, default=1.0)
    cli.add_argument("--max-new-tokens", type=int, default=80)
    cli.add_argument("--device", default="auto")
    cli.add_argument("--out", type=Path, default=ROOT / "studies" / "surface_constraint")
    args = cli.parse_args(argv)
    if args.command == "sample":
        args.bundle = args.bundle_or_out
        sample(args)
    elif args.command == "build":
        build(args.bundle_or_out)
    else:
        score(args.bundle_or_out)


if __name__ == "__main__":
    main()
