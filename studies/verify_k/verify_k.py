"""Verified generation, K candidates against one: does letting the judge choose raise consistency, and at what cost
per problem?

For every test problem of a fold, a trained ours writes one problem from the test problem's equation and context
(the words its selector picks from the real problem, as the generate stage gives ours; a bundle trained with
heuristic keywords gets the fold's keywords of its `context` kind) through mwpgen.generate.service with `verify = K`: K
top-p samples ranked by the judge (mwpgen.judge.judged with the bundle's co-trained mwp2eq as parser: accepted ones
first, the most firmly parsed first). K = 1 is one sample with nothing to choose from (still judged). The same seeds
serve every K. The fold's INDEPENDENT evaluator then parses every chosen problem: ACC-eq exact (canonical form) and
equivalent (sympy), as the evaluate stage scores them, and the judge with the evaluator's parse (the Table 2 column).
Seconds per problem count generation + judging, not the evaluator. What a reader finds is measured apart: the
chosen problems, read blind (studies/verify_k/read_verify_k.py).

    python -m studies.verify_k.verify_k models/ours/arithmetic/fold0 --dataset arithmetic --fold 0 --k 1 8 32 \
        --max-test 100 --out studies/verify_k

Writes <out>/verify_k.json, <out>/verify_k.md (the table) and <out>/verify_k_generations.csv (every chosen problem).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import acc_eq
from mwpgen.generate.request import Request
from mwpgen.generate.service import Service, bundle_folder
from mwpgen.io import read_jsonl
from mwpgen.judge import judged
from mwpgen.lm.decoding import predict_equations
from mwpgen.lm.loading import load_trained
from mwpgen.ours.bundle import load_bundle, load_mwp2eq, select_context
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.paths import FoldPaths
from mwpgen.runtime import resolve_device

ROOT = Path(__file__).resolve().parents[2]


def fold_contexts(selector, settings: dict, tokenizer, records: list[dict], dataset: str,
                  fold: int) -> list[tuple[str, ...]]:
    """Each test problem's context as the generate stage gives ours: the selector's picks, else heuristic keywords."""
    if selector is None:
        keywords = {r["id"]: r[settings["context"]] for r in read_jsonl(FoldPaths(ROOT, None, dataset, fold).keywords)
                    if r["split"] == "test"}
        return [tuple(keywords.get(r["id"], ())) for r in records]
    encoded = [encode_joint(tokenizer, JointExample(r["equation"], r["text"]), settings["max_problem_tokens"])
               for r in records]
    words: list[tuple[str, ...]] = []
    for start in range(0, len(encoded), 32):
        words += [tuple(w) for w in select_context(selector, encoded[start:start + 32], settings["threshold"])[1]]
    return words


def run(args: argparse.Namespace) -> dict:
    device = resolve_device(args.device)
    folder = bundle_folder(args.bundle)
    generator, tokenizer, selector, settings = load_bundle(folder, device)
    service = Service(generator, tokenizer, load_mwp2eq(folder, device), settings)
    if max(args.k) > 1 and not service.can_verify:
        raise SystemExit(f"error: {folder} has no co-trained mwp2eq (trained without L_eq): nothing can verify")
    evaluator_dir = args.evaluator or FoldPaths(ROOT, None, args.dataset, args.fold).evaluator.model_dir
    evaluator, evaluator_tokenizer = load_trained(evaluator_dir, device)
    test = load_fold(args.data, args.dataset, args.fold, max_test=args.max_test, seed=args.seed).test
    contexts = fold_contexts(selector, settings, tokenizer, test, args.dataset, args.fold)
    references = [r["equation"] for r in test]
    rows, generations = [], []
    for k in args.k:
        chosen, verified = [], []
        start = time.perf_counter()
        for i, (record, context) in enumerate(zip(test, contexts)):
            request = Request(equation=record["equation"], context=context, given=record["equation"], n=1,
                              seed=args.seed + i, verify=k if k > 1 else 0, decoding="top_p", top_p=args.top_p,
                              temperature=args.temperature, max_new_tokens=args.max_new_tokens)
            (problem,) = service.answer(request, i)
            chosen.append(problem.masked_text)
            verified.append(problem.verified)
            if (i + 1) % 10 == 0 or i + 1 == len(test):
                print(f"K={k}: {i + 1}/{len(test)} problems, {time.perf_counter() - start:.0f} s", file=sys.stderr,
                      flush=True)
        seconds = time.perf_counter() - start
        parsed = predict_equations(evaluator, evaluator_tokenizer, chosen, device=device)
        checked = [v for v in verified if v is not None]
        evaluator_judged = [judged(p, e, g) for p, e, g in zip(parsed, references, chosen)]
        rows.append({"k": k, "n": len(test), "acc_eq": acc_eq(parsed, references),
                     "acc_eq_equivalent": acc_eq(parsed, references, equivalent_too=True),
                     "verified": sum(checked) / len(checked) if checked else math.nan,
                     "judged_by_evaluator": sum(evaluator_judged) / max(len(test), 1),
                     "s_per_problem": seconds / max(len(test), 1)})
        generations += [{"k": k, "id": r["id"], "equation": r["equation"], "context": " ".join(c), "generated": g,
                         "verified": v, "evaluator_parse": p, "judged_by_evaluator": j}
                        for r, c, g, v, p, j in zip(test, contexts, chosen, verified, parsed, evaluator_judged)]
    return {"bundle": str(folder), "evaluator": str(evaluator_dir), "dataset": args.dataset, "fold": args.fold,
            "n_test": len(test), "seed": args.seed, "top_p": args.top_p, "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens, "device": device,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
            "rows": rows, "generations": generations}


def markdown(result: dict) -> str:
    pct = lambda x: "n/a" if isinstance(x, float) and math.isnan(x) else f"{100 * x:.1f}"  # noqa: E731
    lines = [f"Verified generation on {result['dataset']} fold {result['fold']} ({result['n_test']} test problems, "
             f"{result['device']}): ACC-eq by the independent evaluator of the fold.", "",
             "| K | ACC-eq (%) | ACC-eq equivalent (%) | verified: the service's judge (%) | the judge with the "
             "evaluator's parse (%) | s / problem |",
             "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['k']} | {pct(r['acc_eq'])} | {pct(r['acc_eq_equivalent'])} | {pct(r['verified'])} | "
              f"{pct(r['judged_by_evaluator'])} | {r['s_per_problem']:.3f} |" for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help="a trained ours (bundle folder or MLflow model folder)")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--fold", type=int, required=True)
    ap.add_argument("--evaluator", type=Path, help="default: models/mwp2eq/<dataset>/fold<k>")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 8, 32], help="candidates per problem (default 1 8 32)")
    ap.add_argument("--max-test", type=int, default=0, help="seeded subsample of the test fold (0 = all)")
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", type=Path, default=ROOT / "studies" / "verify_k")
    args = ap.parse_args(argv)
    if min(args.k) < 1:
        raise SystemExit("error: --k values must be >= 1")
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    generations = result.pop("generations")
    (args.out / "verify_k.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "verify_k.md").write_text(markdown(result), encoding="utf-8")
    with open(args.out / "verify_k_generations.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(generations[0]) if generations else ["k"])
        writer.writeheader()
        writer.writerows(generations)
    print(markdown(result), end="")


if __name__ == "__main__":
    main()
