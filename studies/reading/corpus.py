"""A reading corpus to learn a judge from: generated problems for the training-fold and validation equations of one
fold, read blind. Test equations never enter it (they only measure: data/labels/evaluator/README.md).

    python -m studies.reading.corpus draw models/ours/arithmetic/fold0 --model ours --split validation --n 100
    python -m studies.reading.corpus draw models/ours/arithmetic/fold0 --model ours --split train --n 400
    python -m studies.reading.corpus draw models/gpt_pre/arithmetic/fold0 --model gpt_pre --split train --n 400
    python -m studies.reading.corpus draw models/ours-rft/arithmetic/fold0 --model ours --name ours-rft --split train \
        --judge models/judge/arithmetic/fold0 --verify 16 --keep 3 --n 2000 --seed 4 --out data/labels/corpus_round4 \
        --shapes '*' / 'two operators' 'three or more operators' --part hard   # and --keep 1 --shapes + - --part easy
    python -m studies.reading.corpus build      # the blind reading set and its reader batches
    python -m studies.reading.corpus score      # agreement on the overlap; share read right by shape, model, source

`draw` takes a seeded draw of `--n` equations of the split, weighted by shape (SHAPE_WEIGHT: the shapes where right
problems are rare, subtraction, division and two operators, are drawn twice as often; `--shapes` keeps only some),
and for each writes the greedy problem and `--k` top-p samples at each `--temperature` (the service's setting is T = 1,
top-p 0.9; lower temperatures give more right problems, so right and wrong both occur). Ours decodes as `mwpgen
generate` does (mwpgen.generate.service: the selector's context, the same prompt and decoding); GPT-pre as the generate
stage does (the heuristic keywords of the problem as context). With `--judge`, ours answers each equation as
`mwpgen generate --verify K -n N` does with that judge (`--verify`, `--keep`: top-p samples at T = 1, ranked by the
judge, the first N distinct kept): the candidates the judge accepts first, whose mistakes are what its precision is
made of. Every candidate is kept with its source (<out>/candidates/<model>_<split>.csv); nothing a judge computes is
stored, so reading stays blind.

`build` puts every distinct (equation, problem) of every candidates file into one shuffled set (problems.csv:
uid, equation, problem; key.csv: where each came from), a seeded overlap of OVERLAP problems to be read twice, and
reader batches of BATCH problems (batches/batch_NN.csv) for readers side by side. Built again after more draws, it
keeps every uid already given (so labels stay attached) and appends the new problems. Labels go to
labels/batch_NN.csv and labels/overlap.csv (uid,label,note).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from pathlib import Path

from mwpgen.data.equation_shapes import equation_shape as shape
from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "data" / "labels" / "corpus"
SPLITS = ("train", "validation")
MODELS = ("ours", "gpt_pre")
SHAPE_WEIGHT = {"+": 1.0, "*": 1.0, "-": 2.0, "/": 2.0, "^": 2.0, "two operators": 2.0, "three or more operators": 2.0,
                "no operator": 2.0}
CANDIDATE_COLUMNS = ["split", "id", "equation", "shape", "context", "model", "source", "sample", "generated"]
KEY_COLUMNS = ["uid", "split", "id", "shape", "model", "source", "sample"]
OVERLAP = 200
BATCH = 250
SEED = 2021


def weighted_draw(records: list[dict], n: int, seed: str) -> list[dict]:
    """`n` records without replacement, each with probability in proportion to its shape's weight
    (Efraimidis & Spirakis: the n largest u^(1/w)); seeded, in draw order."""
    rng = random.Random(seed)
    keyed = [(rng.random() ** (1.0 / SHAPE_WEIGHT[shape(r["equation"])]), i) for i, r in enumerate(records)]
    return [records[i] for _, i in sorted(keyed, reverse=True)[:n]]


def _records(args: argparse.Namespace) -> list[dict]:
    from mwpgen.config.schema import load_params
    from mwpgen.data.folds import load_fold

    exp = load_params(args.params).experiment
    fold = load_fold(args.data, args.dataset, args.fold, seed=exp.seed, validation_size=exp.validation_size)
    records = fold.validation if args.split == "validation" else fold.train
    drawn = weighted_draw(records, len(records), f"{args.seed}:corpus:{args.split}")
    drawn = drawn[args.skip:]  # the seeded order is fixed: --skip continues an earlier draw of the same seed
    if args.shapes:  # the first --n of these shapes in that order
        drawn = [r for r in drawn if shape(r["equation"]) in args.shapes]
    return drawn[:args.n]


def _sources(args: argparse.Namespace) -> list[tuple[str, dict]]:
    """(source name, decoding settings): the greedy problem, then `k` samples per temperature."""
    return [("greedy", dict(decoding="greedy"))] + [
        (f"T={t:g}", dict(decoding="top_p", temperature=t, top_p=args.top_p)) for t in args.temperature]


def ours_texts(service, prompts: list, decoding: dict, copies: int, seed: int, max_new_tokens: int) -> list[str]:
    """`copies` decoded texts per prompt embedding [P_i, D] (all prompts' copies in one left-padded batch, prompt
    after prompt), cut at the first newline as the service cuts them."""
    import torch

    from mwpgen.lm.decoding import _generation_config  # the project's own helper, private to its module
    from mwpgen.ours.inputs import pad_rows

    config = _generation_config(service.tokenizer, decoding["decoding"], 1, decoding.get("top_p", 1.0),
                                decoding.get("temperature", 1.0), max_new_tokens)
    config.num_return_sequences = copies
    embeds, mask = pad_rows(prompts, left=True)
    torch.manual_seed(seed)
    ids = service.generator.generate(inputs_embeds=embeds, attention_mask=mask, generation_config=config)
    return [t.split("\n", 1)[0].strip() for t in service.tokenizer.batch_decode(ids, skip_special_tokens=True)]


def _ours_service(args: argparse.Namespace, records: list[dict], judge: Path | None):
    """Ours as `mwpgen generate` loads it (with the learned judge at `judge`, if any) and each record's context as its
    selector picks it; a bundle without a trained selector is refused (heuristic keywords exist for test problems)."""
    from mwpgen.device import resolve_device
    from studies.verify_k.verify_k import fold_contexts, load_service

    service, selector = load_service(args.checkpoint, judge, resolve_device(args.device))
    if selector is None:
        raise SystemExit(f"error: {args.checkpoint} uses heuristic keywords, which exist for test problems only: a "
                         "corpus needs a bundle with a trained selector")
    return service, fold_contexts(selector, service.settings, service.tokenizer, records, args.dataset, args.fold)


def _draw_ours(args: argparse.Namespace, records: list[dict]) -> list[dict]:
    import torch

    from mwpgen.generate.request import Request

    service, contexts = _ours_service(args, records, judge=None)
    out, start = [], time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(records), args.batch):
            chunk = range(first, min(first + args.batch, len(records)))
            # The prompts as `mwpgen generate` builds them, left-padded into one batch of `--batch` equations.
            prompts = [service.prompt(Request(equation=records[i]["equation"], context=tuple(contexts[i]),
                                              given=records[i]["equation"])) for i in chunk]
            for source, decoding in _sources(args):
                copies = 1 if source == "greedy" else args.k
                texts = ours_texts(service, prompts, decoding, copies, args.seed + args.skip + first,
                                   args.max_new_tokens)
                for j, i in enumerate(chunk):
                    out += _candidates(args, records[i], " ".join(contexts[i]), source,
                                       texts[j * copies:(j + 1) * copies])
            _progress(args, chunk[-1], len(records), out, start)
    return out


def _draw_accepted(args: argparse.Namespace, records: list[dict]) -> list[dict]:
    """Each equation answered as `mwpgen generate --verify K -n N` answers it with the judge `--judge`: its first N."""
    from mwpgen.generate.request import Request

    service, contexts = _ours_service(args, records, judge=args.judge)
    source = f"judge top {args.keep} of {args.verify}"
    out, start = _drawn_before(args), time.perf_counter()
    done = {r["id"] for r in out}
    for i, (record, context) in enumerate(zip(records, contexts)):
        if record["id"] in done:
            continue  # --resume: this equation's problems were drawn (with this same seed) by the stopped run
        request = Request(equation=record["equation"], context=tuple(context), given=record["equation"],
                          n=args.keep, seed=args.seed + args.skip + i, verify=args.verify, decoding="top_p",
                          top_p=args.top_p, temperature=1.0, max_new_tokens=args.max_new_tokens)
        shown = service.answer(request, i)
        out += _candidates(args, record, " ".join(context), source, [p.masked_text for p in shown])
        if (i + 1) % args.batch == 0 or i + 1 == len(records):
            _progress(args, i, len(records), out, start)
    return out


def _drawn_before(args: argparse.Namespace) -> list[dict]:
    """--resume: the candidates a stopped draw of the same arguments wrote (its file), else none."""
    path = _candidates_file(args)
    if not getattr(args, "resume", False) or not path.exists():
        return []
    drawn = blind_reading.rows(path)
    print(f"resuming: {len({r['id'] for r in drawn})} equations already drawn in {path}", file=sys.stderr)
    return drawn


def _draw_gpt_pre(args: argparse.Namespace, records: list[dict]) -> list[dict]:
    from mwpgen.config.schema import load_params
    from mwpgen.device import resolve_device
    from mwpgen.io import read_jsonl
    from mwpgen.lm.decoding import generate_texts
    from mwpgen.lm.loading import load_trained
    from mwpgen.lm.prompts import generator_prompt
    from mwpgen.paths import FoldPaths

    device = resolve_device(args.device)
    model, tokenizer = load_trained(args.checkpoint, device)
    context_kind = load_params(args.params).keywords.baseline_context
    keywords_file = FoldPaths(args.data.parent, None, args.dataset, args.fold).keywords
    keywords = {r["id"]: r[context_kind] for r in read_jsonl(keywords_file) if r["split"] == "train"}
    out, start = [], time.perf_counter()
    for first in range(0, len(records), args.batch):
        chunk = range(first, min(first + args.batch, len(records)))
        prompts = [generator_prompt(records[i]["equation"], keywords[records[i]["id"]]) for i in chunk]
        for source, decoding in _sources(args):
            copies = 1 if source == "greedy" else args.k
            texts = generate_texts(model, tokenizer, [p for p in prompts for _ in range(copies)],
                                   batch_size=args.batch * copies, seed=args.seed + args.skip + first,
                                   max_new_tokens=args.max_new_tokens, device=device, **decoding)
            for j, i in enumerate(chunk):
                out += _candidates(args, records[i], " ".join(keywords[records[i]["id"]]), source,
                                   texts[j * copies:(j + 1) * copies])
        _progress(args, chunk[-1], len(records), out, start)
    return out


def _candidates(args, record: dict, context: str, source: str, texts: list[str]) -> list[dict]:
    """One row per distinct text of this source, in sampling order; an empty text is not a problem to read."""
    first: dict[str, int] = {}
    for j, t in enumerate(texts):
        if t:
            first.setdefault(t, j)
    return [{"split": args.split, "id": record["id"], "equation": record["equation"],
             "shape": shape(record["equation"]), "context": context, "model": _name(args), "source": source,
             "sample": j, "generated": t} for t, j in first.items()]


def _progress(args, i: int, n: int, rows: list[dict], start: float) -> None:
    """After every batch the candidates so far are written (atomically), so a stopped draw keeps them."""
    blind_reading.write_rows(_candidates_file(args), rows, CANDIDATE_COLUMNS)
    print(f"{_name(args)} {args.split}: {i + 1}/{n} equations, {len(rows)} candidates, "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)


def _name(args) -> str:
    """What the candidates are called: --name (e.g. ours-rft, a tuned ours decoded as ours), else --model."""
    return getattr(args, "name", None) or args.model


def _candidates_file(args) -> Path:
    """<name>_<split>.csv; a draw that continues an earlier one (--skip N) writes <name>_<split>_from<N>.csv, one of
    several parts of a draw (--part P, e.g. other shapes with another --keep) <name>_<split>_<P>.csv."""
    suffix = (f"_from{args.skip}" if args.skip else "") + (f"_{args.part}" if getattr(args, "part", None) else "")
    return args.out / "candidates" / f"{_name(args)}_{args.split}{suffix}.csv"


def _part_name(text: str) -> str:
    """--part becomes part of a file name: letters, digits, - and _ only."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise argparse.ArgumentTypeError(f"{text!r}: letters, digits, - and _ only (it names the candidates file)")
    return text


def draw(args: argparse.Namespace) -> Path:
    if args.resume and not args.judge:
        raise SystemExit("error: --resume continues a --judge draw (the batched draws seed a batch, not an equation)")
    records = _records(args)
    if args.judge:
        rows = _draw_accepted(args, records)
    else:
        rows = (_draw_ours if args.model == "ours" else _draw_gpt_pre)(args, records)
    path = _candidates_file(args)
    blind_reading.write_rows(path, rows, CANDIDATE_COLUMNS)
    print(f"{len(rows)} candidates for {len(records)} equations -> {path}", file=sys.stderr)
    return path


def build(out: Path) -> None:
    """The blind set of every candidates file; uids already given keep their problem, new problems are appended."""
    shown = [r for path in sorted((out / "candidates").glob("*.csv")) for r in blind_reading.rows(path)]
    problems_file = out / "problems.csv"
    known = (
        {(p["equation"], p["problem"]): p["uid"] for p in blind_reading.rows(problems_file)}
        if problems_file.exists()
        else {}
    )
    distinct: dict[tuple[str, str], list[dict]] = {}
    for r in shown:
        distinct.setdefault((r["equation"], r["generated"]), []).append(r)
    new = sorted(set(distinct) - set(known))
    random.Random(f"{SEED}:{len(known)}").shuffle(new)
    for n, pair in enumerate(new, start=len(known) + 1):
        known[pair] = f"k{n:05d}"
    order = sorted(known.items(), key=lambda kv: kv[1])
    problems = [{"uid": uid, "equation": eq, "problem": text} for (eq, text), uid in order]
    blind_reading.write_rows(problems_file, problems, ["uid", "equation", "problem"])
    key = [{"uid": known[pair], **{k: r[k] for k in KEY_COLUMNS[1:]}} for pair, rs in distinct.items() for r in rs]
    blind_reading.write_rows(out / "key.csv", sorted(key, key=lambda r: r["uid"]), KEY_COLUMNS)
    overlap_file = out / "batches" / "overlap.csv"
    if not overlap_file.exists():  # drawn once, from the first build's problems, so a second reading stays valid
        chosen = sorted(random.Random(SEED + 1).sample([p["uid"] for p in problems], min(OVERLAP, len(problems))))
        by_uid = {p["uid"]: p for p in problems}
        blind_reading.write_rows(overlap_file, [by_uid[u] for u in chosen], ["uid", "equation", "problem"])
    for b in range(0, len(problems), BATCH):
        blind_reading.write_rows(out / "batches" / f"batch_{b // BATCH + 1:02d}.csv", problems[b:b + BATCH],
                    ["uid", "equation", "problem"])
    print(f"{len(problems)} distinct problems ({len(new)} new) of {len(shown)} candidates; "
          f"{-(-len(problems) // BATCH)} batches of {BATCH}; overlap {OVERLAP} -> {out}")


def label_file(path: Path) -> dict[str, int]:
    """uid -> 0/1 of one labels file; a label that is neither stops, naming the file and line."""
    labels = {}
    for line, r in enumerate(blind_reading.rows(path), start=2):
        if r.get("label") not in ("0", "1"):
            raise SystemExit(f"error: {path}:{line}: label must be 0 or 1, got {r.get('label')!r}")
        labels[r["uid"]] = int(r["label"])
    return labels


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Agreement of two readings beyond what their label rates give by chance."""
    if not a:
        return float("nan")
    observed = sum(x == y for x, y in zip(a, b)) / len(a)
    pa, pb = sum(a) / len(a), sum(b) / len(b)
    chance = pa * pb + (1 - pa) * (1 - pb)
    return (observed - chance) / (1 - chance) if chance < 1 else 1.0


def first_reading(out: Path) -> dict[str, int]:
    """uid -> 0/1 of the first reading: every labels/batch_*.csv of the set."""
    first: dict[str, int] = {}
    for path in sorted((out / "labels").glob("batch_*.csv")):
        first |= label_file(path)
    return first


def score(out: Path) -> dict:
    """Agreement on the overlap and the share read right by shape, model and source (first reading)."""
    first = first_reading(out)
    overlaps = {}
    for path in sorted((out / "labels").glob("overlap*.csv")):  # overlap.csv, overlap_2.csv, ...: second readings
        second = label_file(path)
        both = [u for u in second if u in first]
        overlaps[path.stem] = {"read_twice": len(both), "agree": sum(first[u] == second[u] for u in both),
                               "kappa": round(cohen_kappa([first[u] for u in both], [second[u] for u in both]), 3)}
    both_all = sum(o["read_twice"] for o in overlaps.values())
    agree = sum(o["agree"] for o in overlaps.values())
    key = [r for r in blind_reading.rows(out / "key.csv") if r["uid"] in first]
    groups: dict[str, dict[str, list[int]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    seen: set[tuple[str, str]] = set()
    for r in key:
        for by in ("shape", "model", "source", "split"):
            if (r["uid"], by + r[by]) not in seen:  # a text two sources share counts once per group
                seen.add((r["uid"], by + r[by]))
                groups[by][r[by]].append(first[r["uid"]])
    result = {"read": len(first), "right": sum(first.values()), "overlap_read_twice": both_all,
              "overlap_agree": agree, "overlaps": overlaps,
              "by": {by: {k: {"n": len(v), "right": sum(v)} for k, v in sorted(g.items())} for by, g in groups.items()}}
    (out / "reading.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw", help="generate candidates for a seeded, shape-weighted draw of equations")
    d.add_argument("checkpoint", type=Path, help="ours: a bundle or MLflow model folder; gpt_pre: its model folder")
    d.add_argument("--model", choices=MODELS, required=True, help="how it decodes (ours: a bundle, as `mwpgen "
                   "generate` does; gpt_pre: the generate stage's prompt)")
    d.add_argument("--name", help="what to call the candidates (file and model column; default --model), e.g. "
                   "ours-rft for a tuned ours")
    d.add_argument("--split", choices=SPLITS, required=True)
    d.add_argument("--dataset", default="arithmetic")
    d.add_argument("--fold", type=int, default=0)
    d.add_argument("--n", type=int, default=100, help="equations drawn from the split")
    d.add_argument("--skip", type=int, default=0,
                   help="skip the first N equations of the seeded draw (an earlier draw wrote them)")
    d.add_argument("--shapes", nargs="+", choices=sorted(SHAPE_WEIGHT),
                   help="only equations of these shapes (the first --n of them in the seeded order, after --skip)")
    d.add_argument("--batch", type=int, default=16, help="equations decoded in one batch")
    d.add_argument("--k", type=int, default=3, help="samples per temperature")
    d.add_argument("--temperature", type=float, nargs="+", default=[0.7, 1.0])
    d.add_argument("--top-p", type=float, default=0.9)
    d.add_argument("--seed", type=int, default=SEED)
    d.add_argument("--max-new-tokens", type=int, default=80)
    d.add_argument("--resume", action="store_true",
                   help="with --judge: keep what a stopped draw of the same arguments wrote and draw the rest (each "
                   "equation keeps its seed, so the result is the uninterrupted draw's)")
    d.add_argument("--part", type=_part_name,
                   help="a name for this part of a draw made in parts (its candidates file's suffix), e.g. `hard` "
                   "for --shapes '*' '/' with --keep 3 beside `easy` for --shapes + - with --keep 1")
    d.add_argument("--judge", type=Path, help="ours only: keep what this learned judge ranks first among --verify "
                   "samples at T = 1 (as `mwpgen generate --verify K` shows them), --keep per equation")
    d.add_argument("--verify", type=int, default=16, help="with --judge: samples ranked per equation")
    d.add_argument("--keep", type=int, default=2, help="with --judge: the first N distinct kept per equation")
    d.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    d.add_argument("--data", type=Path, default=ROOT / "data", help="the project's data folder (processed, splits)")
    d.add_argument("--device", default="auto")
    d.add_argument("--out", type=Path, default=OUT)
    for name, help_text in (("build", "the blind reading set and reader batches"),
                            ("score", "agreement and the share read right")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.command == "draw":
        if args.k < 1 or args.n < 1 or args.batch < 1 or args.skip < 0:
            ap.error("--k, --n and --batch must be >= 1, --skip >= 0")
        if args.judge and (args.model != "ours" or args.keep < 1 or args.verify < args.keep):
            ap.error("--judge ranks ours' samples: --model ours, --keep >= 1 and --verify >= --keep")
        draw(args)
    elif args.command == "build":
        build(args.out)
    else:
        score(args.out)


if __name__ == "__main__":
    main()
