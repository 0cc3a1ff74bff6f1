"""What verified generation has to choose from: every one of the K candidates, read blind. Does a pool of K samples
hold a right problem, and which ranking puts one first?

    python -m studies.verify_pools.verify_pools sample models/ours/arithmetic/fold0 --dataset arithmetic --fold 0 \
        --split validation --n 20 --k 16 --temperature 1 0.7 --greedy --out studies/verify_pools
    python -m studies.verify_pools.verify_pools sample ... --split test ...
    python -m studies.verify_pools.verify_pools build studies/verify_pools  # one blind reading of both splits
    python -m studies.verify_pools.verify_pools score                       # labels -> rankings compared per split

`sample` draws `--n` equations (seeded) of the fold's validation slice or test fold, and for each samples K top-p
candidates at each `--temperature` as `mwpgen generate --verify K` does (mwpgen.generate.service: the same prompt,
seeds and decoding), and with `--greedy` the greedy problem too, keeping every distinct candidate of each pool in
sampling order with what each ranking can use: the co-trained mwp2eq's parse, its verdict (mwpgen.judge.rule.judged) and
its log p(equation) per token (the service's rank), the generator's mean token log-likelihood, and the fold's
independent evaluator's parse and verdict. Writes <out>/pools_<split>.csv.

`build` makes one blind reading set (studies/reading/blind_reading.py) of both splits' candidates, shuffled together:
readers see equation and problem only. It lives in `--reading` (default data/labels/verify_pools: the judge's stages
read its validation pools to choose and its test pools to measure, and a stage reads labels from data/ only). `score`
reports per split and pool (each temperature's, and each with the greedy problem as its first candidate): the share of
candidates read right, the share of pools whose first k candidates hold a right one (what a perfect judge could show at
K = k), and for every ranking the share of shown problems read right and the precision of its "verified". Validation
pools choose a ranking; test pools only measure it (data/labels/evaluator/README.md).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
READING = ROOT / "data" / "labels" / "verify_pools"  # the committed reading of every sampled candidate
SPLITS = ("validation", "test")
COLUMNS = [
    "split",
    "id",
    "equation",
    "context",
    "source",
    "sample",
    "copies",
    "generated",
    "co_verified",
    "co_parse",
    "co_firmness",
    "generator_loglik",
    "evaluator_parse",
    "evaluator_judged",
]
KEY = ["split", "id", "source", "sample", "co_verified", "co_firmness", "generator_loglik", "evaluator_judged"]
RESAMPLES = 1000


def sample(args: argparse.Namespace) -> None:
    from mwpgen.config.schema import load_params
    from mwpgen.data.folds import load_fold
    from mwpgen.device import resolve_device
    from mwpgen.generate.request import Request
    from mwpgen.generate.service import bundle_folder
    from mwpgen.judge.rule import judged
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import load_trained
    from mwpgen.paths import FoldPaths
    from studies.verify_k.verify_k import fold_contexts, load_service

    device = resolve_device(args.device)
    folder = bundle_folder(args.bundle)
    service, selector = load_service(args.bundle, None, device)  # the rule ranks: no learned judge here
    settings, tokenizer = service.settings, service.tokenizer
    if not service.can_verify:
        raise SystemExit(f"error: {folder} has no co-trained mwp2eq (trained without L_eq): nothing to rank with")
    exp = load_params(args.params).experiment
    fold = load_fold(args.data, args.dataset, args.fold, seed=exp.seed,
                     validation_size=exp.validation_size if args.split == "validation" else 0)
    records = fold.validation if args.split == "validation" else fold.test
    records = random.Random(f"{args.seed}:pools:{args.split}").sample(records, min(args.n, len(records)))
    if args.split == "validation" and selector is None:
        raise SystemExit("error: heuristic-keyword bundles have keywords for test problems only; use --split test")
    contexts = fold_contexts(selector, settings, tokenizer, records, args.dataset, args.fold)
    evaluator, evaluator_tokenizer = load_trained(
        args.evaluator or FoldPaths(ROOT, None, args.dataset, args.fold).evaluator.model_dir, device)
    rows, start = [], time.perf_counter()
    for i, (record, context) in enumerate(zip(records, contexts)):
        equation = record["equation"]
        common = dict(equation=equation, context=context, given=equation, n=1, seed=args.seed + i,
                      max_new_tokens=args.max_new_tokens)
        requests = [("greedy", Request(**common, decoding="greedy"))] if args.greedy else []
        requests += [(f"T={t:g}", Request(**common, verify=args.k, decoding="top_p", top_p=args.top_p, temperature=t))
                     for t in args.temperature]
        for source, request in requests:
            service.check(request)
            prompt = service.prompt(request)
            drawn = service.samples(request, prompt)  # sampling order, repeats included
            first = {}
            for j, t in enumerate(drawn):
                first.setdefault(t, j)
            texts = list(first)  # the distinct candidates service.answer ranks
            loglik = service.mean_log_likelihood(prompt, texts)
            co_parse = service.parse(texts)
            firmness = service.equation_firmness(texts, equation)
            evaluator_parse = predict_equations(evaluator, evaluator_tokenizer, texts, device=device)
            rows += [
                {
                    "split": args.split,
                    "id": record["id"],
                    "equation": equation,
                    "context": " ".join(context),
                    "source": source,
                    "sample": first[t],
                    "copies": drawn.count(t),
                    "generated": t,
                    "co_verified": judged(cp, equation, t),
                    "co_parse": cp,
                    "co_firmness": round(f, 4),
                    "generator_loglik": round(g, 4),
                    "evaluator_parse": ep,
                    "evaluator_judged": judged(ep, equation, t),
                }
                for t, cp, f, g, ep in zip(texts, co_parse, firmness, loglik, evaluator_parse)
            ]
        print(f"{args.split}: {i + 1}/{len(records)} pools, {len(rows)} candidates, "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    blind_reading.write_rows(args.out / f"pools_{args.split}.csv", rows, COLUMNS)


def build(folder: Path, reading: Path) -> None:
    shown = [r for split in SPLITS if (folder / f"pools_{split}.csv").exists()
             for r in blind_reading.rows(folder / f"pools_{split}.csv")]
    blind_reading.build(reading, shown, KEY, prefix="c")


# Rankings of a pool (its candidates in sampling order): the first one is what verified generation shows, and its
# "verified" is the ranking's verdict on it.
def _flag(r: dict, name: str) -> bool:
    return r[name] == "True"


RANKINGS = {
    "first candidate (no verification)": (lambda r: 0.0, lambda r: False),
    "service: co-trained verdict, then firmness": (
        lambda r: (not _flag(r, "co_verified"), -float(r["co_firmness"])), lambda r: _flag(r, "co_verified")),
    "evaluator's verdict, then firmness": (
        lambda r: (not _flag(r, "evaluator_judged"), -float(r["co_firmness"])),
        lambda r: _flag(r, "evaluator_judged")),
    "both parsers' verdicts, then firmness": (
        lambda r: (not (_flag(r, "co_verified") and _flag(r, "evaluator_judged")), not _flag(r, "co_verified"),
                   -float(r["co_firmness"])),
        lambda r: _flag(r, "co_verified") and _flag(r, "evaluator_judged")),
    "co-trained verdict, then generator likelihood": (
        lambda r: (not _flag(r, "co_verified"), -float(r["generator_loglik"])), lambda r: _flag(r, "co_verified")),
}


def _interval(values: np.ndarray, rng: np.random.Generator) -> list[float]:
    if len(values) == 0:
        return [float("nan")] * 2
    boot = values[rng.integers(0, len(values), size=(RESAMPLES, len(values)))].mean(axis=1)
    return [float(x) for x in np.percentile(boot, [2.5, 97.5])]


def score_pools(pools: dict[str, list[dict]], ks: list[int], seed: int = blind_reading.SEED) -> dict:
    """`pools`: equation id -> its candidates in sampling order, each with a 0/1 "read" label and the KEY columns."""
    rng = np.random.default_rng(seed)
    out: dict = {"pools": len(pools), "candidates": sum(len(p) for p in pools.values()),
                 "candidates_right": float(np.mean([c["read"] for p in pools.values() for c in p])), "per_k": {}}
    for k in ks:  # the candidates the first k samples drew (a repeat adds none)
        heads = {i: sorted((c for c in p if int(c["sample"]) < k), key=lambda c: int(c["sample"]))
                 for i, p in pools.items()}
        holds = np.array([max(c["read"] for c in h) for h in heads.values()], dtype=float)
        per_k = {"pool_holds_right": float(holds.mean()), "pool_holds_right_95ci": _interval(holds, rng),
                 "rankings": {}}
        for name, (key, verdict) in RANKINGS.items():
            shown = [min(h, key=key) for h in heads.values()]  # min is stable: ties keep sampling order
            right = np.array([c["read"] for c in shown], dtype=float)
            accepted = [c["read"] for c in shown if verdict(c)]
            per_k["rankings"][name] = {
                "shown_right": float(right.mean()), "shown_right_95ci": _interval(right, rng),
                "verified": len(accepted), "verified_right": int(sum(accepted)),
                "verified_precision": sum(accepted) / len(accepted) if accepted else None}
        out["per_k"][k] = per_k
    return out


def candidate_pools(key: list[dict], first: dict[str, int], split: str) -> dict[str, dict[str, list[dict]]]:
    """Pool kind -> equation id -> candidates with their reading: one pool per sampled source (a temperature), and
    where the greedy problem was kept, each temperature's pool with the greedy problem as its first candidate."""
    by_source: dict[str, dict[str, list[dict]]] = {}
    for r in key:
        if r["split"] == split:
            by_source.setdefault(r["source"], {}).setdefault(r["id"], []).append({**r, "read": first[r["uid"]]})
    greedy = by_source.pop("greedy", None)
    kinds = dict(by_source)
    if greedy:
        for source, pools in by_source.items():
            for i, pool in pools.items():
                # The greedy problem is candidate 0 and sample j becomes j + 1: K candidates are the greedy one and
                # K - 1 samples. The same text sampled again is the same candidate.
                first = [{**c, "sample": "0"} for c in greedy.get(i, [])]
                seen = {c["uid"] for c in first}
                kinds.setdefault(f"greedy + {source}", {})[i] = first + [
                    {**c, "sample": str(int(c["sample"]) + 1)} for c in pool if c["uid"] not in seen]
    return kinds


def _pool_table(title: str, s: dict, pct) -> list[str]:
    lines = [f"**{title}**: {s['pools']} equations, {s['candidates']} candidates, {pct(s['candidates_right'])} % of "
             "them read right.", "",
             "| K | a right one among the first K (%) [95% CI] | ranking | shown right (%) [95% CI] | verified | "
             "verified: yes right (%) |", "|---:|---:|---|---:|---:|---:|"]
    for k, r in s["per_k"].items():
        lo, hi = r["pool_holds_right_95ci"]
        for n, (name, x) in enumerate(r["rankings"].items()):
            head = f"| {k} | {pct(r['pool_holds_right'])} [{pct(lo)}, {pct(hi)}] |" if n == 0 else "| | |"
            a, b = x["shown_right_95ci"]
            lines.append(f"{head} {name} | {pct(x['shown_right'])} [{pct(a)}, {pct(b)}] | {x['verified']} | "
                         f"{pct(x['verified_precision'])} ({x['verified_right']} of {x['verified']}) |")
    return lines + [""]


def score(reading: Path, ks: list[int]) -> dict:
    key, first, second = blind_reading.labels(reading)
    result: dict = {"problems_read": len(first), "overlap": len(second),
                    "overlap_agree": sum(first[u] == y for u, y in second.items()), "splits": {}}
    for split in SPLITS:
        for kind, pools in candidate_pools(key, first, split).items():
            result["splits"].setdefault(split, {})[kind] = score_pools(pools, ks)
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}"  # noqa: E731 — a one-line local helper
    lines = [f"Every candidate of verified generation, read blind ({len(first)} distinct problems; the two readings "
             f"of the {len(second)}-problem overlap agree on {result['overlap_agree']}). Validation pools choose; "
             f"test pools measure.", ""]
    for split, kinds in result["splits"].items():
        for kind, pools in kinds.items():
            lines += _pool_table(f"{split}, {kind}", pools, pct)
    return blind_reading.write_report(reading, result, lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="sample and keep every candidate of --n equations")
    s.add_argument("bundle", type=Path, help="a trained ours (bundle folder or MLflow model folder)")
    s.add_argument("--dataset", required=True)
    s.add_argument("--fold", type=int, required=True)
    s.add_argument("--split", choices=SPLITS, required=True)
    s.add_argument("--n", type=int, default=25, help="equations, a seeded draw of the split")
    s.add_argument("--k", type=int, default=32, help="candidates sampled per equation")
    s.add_argument("--seed", type=int, default=2021)
    s.add_argument("--top-p", type=float, default=0.9)
    s.add_argument("--temperature", type=float, nargs="+", default=[1.0],
                   help="one pool of K samples per temperature")
    s.add_argument("--greedy", action="store_true", help="also keep the greedy problem (one more candidate)")
    s.add_argument("--max-new-tokens", type=int, default=80)
    s.add_argument("--evaluator", type=Path, help="default: models/evaluator/<dataset>/fold<k>")
    s.add_argument("--params", type=Path, default=ROOT / "params.yaml", help="for the validation slice's size")
    s.add_argument("--data", type=Path, default=ROOT / "data")
    s.add_argument("--device", default="auto")
    s.add_argument("--out", type=Path, default=ROOT / "studies" / "verify_pools")
    b = sub.add_parser("build", help="the blind reading set of every sampled candidate")
    b.add_argument("folder", type=Path, help="sample's --out folder (pools_<split>.csv)")
    b.add_argument("--reading", type=Path, default=READING, help="the blind set's folder (default: "
                   "data/labels/verify_pools)")
    c = sub.add_parser("score", help="labels -> pools and rankings per split")
    c.add_argument("--reading", type=Path, default=READING, help="the blind set's folder (default: "
                   "data/labels/verify_pools)")
    c.add_argument("--k", type=int, nargs="+", default=[1, 8, 16], help="pool sizes to score (first k samples)")
    args = ap.parse_args(argv)
    if args.command == "sample":
        if args.k < 1 or args.n < 1:
            raise SystemExit("error: --k and --n must be >= 1")
        sample(args)
    elif args.command == "build":
        build(args.folder, args.reading)
    else:
        score(args.reading, args.k)


if __name__ == "__main__":
    main()
