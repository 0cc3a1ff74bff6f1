"""Verified generation, K candidates against one: does letting the judge choose raise consistency, and at what cost
per problem?

For every test problem of a fold, a trained ours writes one problem from the test problem's equation and context
(the words its selector picks from the real problem, as the generate stage gives ours; a bundle trained with
heuristic keywords gets the fold's keywords of its `context` kind) through mwpgen.generate.service with `verify = K`: K
top-p samples ranked by the judge (mwpgen.judge.rule.judged with the bundle's co-trained mwp2eq as parser: accepted ones
first, the most firmly parsed first; with `--judge FOLDER`, the learned judge saved there, as `mwpgen generate
--judge` ranks). K = 1 is one sample with nothing to choose from (still judged). The same seeds
serve every K. The fold's INDEPENDENT evaluator then parses every chosen problem: ACC-eq exact (canonical form) and
equivalent (sympy), as the evaluate stage scores them, and the judge with the evaluator's parse (the Table 2 column).
Seconds per problem count generation + judging, not the evaluator. What a reader finds is measured apart: the
chosen problems, read blind (studies/verify_k/read_verify_k.py).

    python -m studies.verify_k.verify_k models/ours/arithmetic/fold0 --dataset arithmetic --fold 0 --k 1 8 32 \
        --max-test 100 --out studies/verify_k [--judge models/judge/arithmetic/fold0]

Writes <out>/verify_k.json, <out>/verify_k.md (the table) and <out>/verify_k_generations.csv (every chosen problem,
written as it is chosen: `--resume` continues a stopped run, `--first N` makes the seeded N-problem subsample first).
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
from mwpgen.device import resolve_device
from mwpgen.evaluation.metrics import acc_eq
from mwpgen.generate.request import Request
from mwpgen.generate.service import Service, bundle_folder
from mwpgen.io import read_jsonl
from mwpgen.judge.model import LearnedJudge
from mwpgen.judge.rule import judged
from mwpgen.lm.decoding import predict_equations
from mwpgen.lm.loading import load_trained
from mwpgen.ours.bundle import load_bundle, load_mwp2eq, select_context
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.paths import FoldPaths

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


GENERATIONS = "verify_k_generations.csv"
ARGS = "verify_k_args.json"  # what a run was asked for: --resume continues only the same run
SHOWN = ["k", "id", "equation", "context", "generated", "verified", "judge_probability", "seconds"]
SAME_RUN = ("bundle", "judge", "dataset", "fold", "evaluator", "k", "max_test", "first", "seed", "top_p",
            "temperature", "max_new_tokens")


def run_order(test: list[dict], first: list[dict]) -> list[tuple[int, dict]]:
    """(index in `test`, record) with the records of `first` (a subsample of `test`) first, then the rest in order:
    each problem's seed is its index in `test`, so a run stopped early has measured `first` and the problems it shows
    are those of an uninterrupted run."""
    ids = {r["id"] for r in first}
    indexed = list(enumerate(test))
    return [t for t in indexed if t[1]["id"] in ids] + [t for t in indexed if t[1]["id"] not in ids]


def project_relative(path: Path) -> str:
    """`path` as a result file records it: relative to the project where it lies inside, so results name no machine."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _settings(args: argparse.Namespace) -> dict:
    """The run's settings as JSON values (paths as given)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k in SAME_RUN}


def done_rows(out: Path, args: argparse.Namespace) -> list[dict]:
    """The problems an earlier run of the same settings already showed (--resume), else []; another run's folder is
    an error naming the setting that differs."""
    path = out / GENERATIONS
    if not args.resume or not path.exists():
        return []
    recorded = json.loads((out / ARGS).read_text(encoding="utf-8")) if (out / ARGS).exists() else {}
    differ = [k for k in SAME_RUN if recorded.get(k) != _settings(args).get(k)]
    if differ:
        raise SystemExit(f"error: --resume: {out / ARGS} was another run ({', '.join(differ)} differ); give another "
                         "--out or drop --resume")
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: r[k] for k in SHOWN} for r in csv.DictReader(f)]


def load_service(bundle: Path, judge_dir: Path | None, device: str) -> tuple[Service, object]:
    """The served model as `mwpgen generate` loads it (the bundle's generator, co-trained mwp2eq and settings, and the
    judge at `judge_dir` if given) and the bundle's selector, which picks each equation's context (fold_contexts)."""
    folder = bundle_folder(bundle)
    generator, tokenizer, selector, settings = load_bundle(folder, device)
    judge = LearnedJudge.load(judge_dir, device) if judge_dir else None
    return Service(generator, tokenizer, load_mwp2eq(folder, device), settings, judge), selector


def run(args: argparse.Namespace) -> dict:
    device = resolve_device(args.device)
    service, selector = load_service(args.bundle, args.judge, device)
    folder, tokenizer, settings = bundle_folder(args.bundle), service.tokenizer, service.settings
    if max(args.k) > 1 and not service.can_verify:
        raise SystemExit(f"error: {folder} has no co-trained mwp2eq (trained without L_eq): nothing can verify")
    evaluator_dir = args.evaluator or FoldPaths(ROOT, None, args.dataset, args.fold).evaluator.model_dir
    test = load_fold(args.data, args.dataset, args.fold, max_test=args.max_test, seed=args.seed).test
    first = load_fold(args.data, args.dataset, args.fold, max_test=args.first, seed=args.seed).test if args.first \
        else []
    contexts = dict(zip((r["id"] for r in test), fold_contexts(selector, settings, tokenizer, test, args.dataset,
                                                                args.fold)))
    args.out.mkdir(parents=True, exist_ok=True)
    shown = done_rows(args.out, args)
    done = {(int(r["k"]), r["id"]) for r in shown}
    (args.out / ARGS).write_text(json.dumps(_settings(args), indent=2) + "\n", encoding="utf-8")
    with open(args.out / GENERATIONS, "w", newline="", encoding="utf-8") as f:  # every problem as it is shown
        writer = csv.DictWriter(f, SHOWN)
        writer.writeheader()
        writer.writerows(shown)
        for k in args.k:
            start, made = time.perf_counter(), 0
            for i, record in run_order(test, first):
                if (k, record["id"]) in done:
                    continue
                if args.make is not None and made >= args.make:
                    break  # --make: the rest is left for a later --resume
                began = time.perf_counter()
                request = Request(equation=record["equation"], context=contexts[record["id"]],
                                  given=record["equation"], n=1, seed=args.seed + i, verify=k if k > 1 else 0,
                                  decoding="top_p", top_p=args.top_p, temperature=args.temperature,
                                  max_new_tokens=args.max_new_tokens)
                (problem,) = service.answer(request, i)
                row = {"k": k, "id": record["id"], "equation": record["equation"],
                       "context": " ".join(contexts[record["id"]]), "generated": problem.masked_text,
                       "verified": problem.verified, "judge_probability": problem.judge_probability,
                       "seconds": round(time.perf_counter() - began, 3)}
                writer.writerow(row)
                f.flush()
                shown.append(row)
                made += 1
                if made % 10 == 0:
                    print(f"K={k}: {made} problems this run, {time.perf_counter() - start:.0f} s", file=sys.stderr,
                          flush=True)
    del service  # the evaluator reads next: one model's weights at a time
    return summarise(args, evaluator_dir, test, shown, device)


def summarise(args: argparse.Namespace, evaluator_dir: Path, test: list[dict], shown: list[dict], device: str) -> dict:
    """Every shown problem read by the fold's INDEPENDENT evaluator, and per K: ACC-eq, the share verified, the judge
    with the evaluator's parse and seconds per problem, over the problems shown so far (`n`)."""
    evaluator, evaluator_tokenizer = load_trained(evaluator_dir, device)
    parsed = predict_equations(evaluator, evaluator_tokenizer, [r["generated"] for r in shown], device=device)
    generations = [r | {"evaluator_parse": p, "judged_by_evaluator": judged(p, r["equation"], r["generated"])}
                   for r, p in zip(shown, parsed)]
    rows = []
    for k in args.k:
        of = [g for g in generations if int(g["k"]) == k]
        checked = [str(g["verified"]) == "True" for g in of if str(g["verified"]) in ("True", "False")]
        rows.append({"k": k, "n": len(of),
                     "acc_eq": acc_eq([g["evaluator_parse"] for g in of], [g["equation"] for g in of]),
                     "acc_eq_equivalent": acc_eq([g["evaluator_parse"] for g in of], [g["equation"] for g in of],
                                                 equivalent_too=True),
                     "verified": sum(checked) / len(checked) if checked else math.nan,
                     "judged_by_evaluator": sum(g["judged_by_evaluator"] for g in of) / max(len(of), 1),
                     "s_per_problem": sum(float(g["seconds"]) for g in of) / max(len(of), 1)})
    return {"bundle": str(args.bundle), "judge": str(args.judge) if args.judge else "rule (the co-trained mwp2eq)",
            "evaluator": project_relative(evaluator_dir), "dataset": args.dataset, "fold": args.fold,
            "n_test": len(test),
            "first": args.first, "seed": args.seed, "top_p": args.top_p, "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens, "device": device,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or "cpu",
            "rows": rows, "generations": generations}


def markdown(result: dict) -> str:
    def pct(x):
        return "n/a" if isinstance(x, float) and math.isnan(x) else f"{100 * x:.1f}"
    lines = [
        f"Verified generation on {result['dataset']} fold {result['fold']} ({result['n_test']} test problems, "
        f"{result['device']}; judge: {result['judge']}): ACC-eq by the independent evaluator of the fold.",
        "",
        "| K | shown | ACC-eq (%) | ACC-eq equivalent (%) | verified: the service's judge (%) | the judge with the "
        "evaluator's parse (%) | s / problem |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['k']} | {r['n']} | {pct(r['acc_eq'])} | {pct(r['acc_eq_equivalent'])} | {pct(r['verified'])} | "
              f"{pct(r['judged_by_evaluator'])} | {r['s_per_problem']:.3f} |" for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help="a trained ours (bundle folder or MLflow model folder)")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--fold", type=int, required=True)
    ap.add_argument("--evaluator", type=Path, help="default: models/evaluator/<dataset>/fold<k>")
    ap.add_argument("--judge", type=Path, help="a learned judge (train_judge's output) to verify with; default: the "
                    "rule with the co-trained mwp2eq")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 8, 32], help="candidates per problem (default 1 8 32)")
    ap.add_argument("--max-test", type=int, default=0, help="seeded subsample of the test fold (0 = all)")
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=80)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--first", type=int, default=0, help="the seeded N-problem subsample (as --max-test N draws it) "
                    "goes first, so a run stopped early has measured it; seeds stay as in a run in order")
    ap.add_argument("--resume", action="store_true", help="keep the problems an earlier run of the same settings "
                    "showed in --out and make only the rest")
    ap.add_argument("--make", type=int, help="make at most N problems per K this run, then score what is shown "
                    "(0: only score; the rest is left for a later --resume)")
    ap.add_argument("--out", type=Path, default=ROOT / "studies" / "verify_k")
    args = ap.parse_args(argv)
    if min(args.k) < 1:
        raise SystemExit("error: --k values must be >= 1")
    result = run(args)
    generations = result.pop("generations")
    (args.out / "verify_k.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "verify_k.md").write_text(markdown(result), encoding="utf-8")
    with open(args.out / GENERATIONS, "w", newline="", encoding="utf-8") as f:  # now with the evaluator's reading
        writer = csv.DictWriter(f, list(generations[0]) if generations else SHOWN)
        writer.writeheader()
        writer.writerows(generations)
    print(markdown(result), end="")


if __name__ == "__main__":
    main()
