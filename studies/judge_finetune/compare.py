"""A judge fine-tuned as a whole against today's judge, on the validation readings.

    P=$HOME/.cache/mwpgen/models/smollm2-135m-instruct C=.cache/judge_finetune   # or P=the fold's evaluator
    R="nice -n 19 bash scripts/run.sh python -m studies.judge_finetune.compare"
    $R rule --cache $C                        # or --evaluator models/evaluator/arithmetic/fold0 to parse afresh
    $R probe --backbone $P --cache $C --layers 6 12 --max-train 1000
    $R cost --backbone $P --cache $C --layers 6 12
    $R finetune --backbone $P --cache $C --layers 6 --max-train 1000 --lr 1e-4 --seed 0   # and --seed 1, ...
    $R finetune --backbone $P --cache $C --layers 6 --max-train 1000 --synthetic 500 --lr 1e-4 --seed 0 \
        --data /work/run/data
    $R table --cache $C --out studies/judge_finetune/results

Each step scores every validation reading with one candidate (candidates.py) and keeps the scores in the cache;
`table` reads them all and writes <out>.json and <out>.md: AUC, precision at recall 0.3 and 0.5, calibration error
after Platt scaling (fitted on these same readings: in-sample), the cost per candidate on this CPU, and precision at
recall 0.5 per equation shape. Fine-tuned seeds of one configuration are also averaged (p) as an ensemble; each judge
is also gated by the rule (mwpgen.judge.verdicts.gated_scores, as train_judge tries it). Only the `train` and
`validation` readings are read (mwpgen.judge.readings); the test part never is.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from mwpgen.config.schema import load_params
from mwpgen.device import autocast_dtype
from mwpgen.judge.choose import subsample
from mwpgen.judge.readings import CHOOSING_SETS, corpus_set, readings
from mwpgen.judge.verdicts import gated_scores
from studies.judge_finetune import candidates
from studies.judge_finetune.figures import SHAPES, figures, paired_difference, shape
from studies.judge_finetune.synthetic import synthetic_readings

ROOT = Path(__file__).resolve().parents[2]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def parts(limit: int) -> tuple[list[dict], list[dict]]:
    """(train, validation) readings; `limit`: only the first N of each (a smoke run: its figures mean nothing)."""
    held = readings(ROOT, CHOOSING_SETS)
    train, validation = held["train"], held["validation"]
    return (train[:limit], validation[:limit]) if limit else (train, validation)


def corpus_readings(name: str, held: list[dict]) -> list[dict]:
    """The `train` readings of a reading corpus under data/labels that the judge is not fitted on (laid out as
    mwpgen.judge.readings' CORPORA), but for texts already in `held`."""
    seen = {(r["equation"], r["problem"]) for r in held}
    rows = []
    for r in corpus_set(name).read(ROOT):
        if r["part"] == "train" and (r["equation"], r["problem"]) not in seen:
            seen.add((r["equation"], r["problem"]))
            rows.append(r)
    return rows


def training_rows(args, params, train: list[dict], validation: list[dict] = ()) -> list[dict]:
    """The training readings (a seeded, label-stratified `--max-train` of them, as judge.max_readings draws), plus
    `--synthetic` synthetic readings (seeded) and the readings of each `--with-corpus` where asked."""
    train = train + [r for name in getattr(args, "with_corpus", []) for r in
                     corpus_readings(name, train + list(validation))]
    rows = subsample(train, args.max_train, params.experiment.seed)
    if getattr(args, "synthetic", 0):
        made = synthetic_readings(args.data, "arithmetic", 0, params.experiment.seed,
                                  params.experiment.validation_size)
        rows = rows + subsample(made, args.synthetic, params.experiment.seed)
    return rows


def name_of(args, layer: int | None = None) -> str:
    n = f"n{args.max_train or 'all'}" + "".join(f"+{c}" for c in getattr(args, "with_corpus", []))
    if args.step == "probe":
        return f"probe_L{layer}_{n}"
    synthetic = f"_synthetic{args.synthetic}" if args.synthetic else ""
    return f"finetune_L{args.layers[0]}_{n}{synthetic}_e{args.epochs}_lr{args.lr:g}_seed{args.seed}"


def score(args) -> None:
    params = load_params(ROOT / "params.yaml")
    cfg = params.judge
    train, validation = parts(args.limit)
    where = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "backbone": str(args.backbone),
             "command": " ".join(sys.argv)}
    if args.step == "rule":
        if args.evaluator is None:  # the committed evaluator's recorded parses
            verdicts, origin = candidates.stored_rule_scores(ROOT, validation)
            candidates.save_scores(args.cache, "rule", validation, verdicts, origin=origin, **where)
        else:
            verdicts, parses, cost = candidates.rule_scores(args.evaluator, validation, params.generate.batch_size)
            candidates.save_scores(args.cache, "rule", validation, verdicts, parses=parses, cost=cost,
                                   evaluator=str(args.evaluator), **where)
        print(f"rule: {sum(verdicts):.0f} of {len(verdicts)} accepted")
        return
    if args.step == "cost":
        rows = validation[:args.cost_rows]
        cost = candidates.costs(args.evaluator or args.backbone, args.backbone, args.layers, rows,
                                parse_batch=params.generate.batch_size, judge_batch=cfg.batch_size,
                                repeats=args.repeats, stops_after_equation=args.evaluator is None)
        args.cache.mkdir(parents=True, exist_ok=True)
        (args.cache / "cost.json").write_text(json.dumps({**cost, **where}, indent=1) + "\n", encoding="utf-8")
        print(cost)
        return
    rows = training_rows(args, params, train, validation)
    counts = {"n": len(rows), "right": sum(r["label"] for r in rows),
              "synthetic": sum(r.get("source") == "synthetic" for r in rows)}
    print(f"{args.step}: {counts} training rows, {len(validation)} validation", flush=True)
    if args.step == "probe":
        start = time.perf_counter()
        probes = candidates.probe_scores(args.backbone, rows, validation, args.layers, cfg.l2, args.cache)
        seconds = round(time.perf_counter() - start, 1)
        for layer, p in probes.items():
            path = candidates.save_scores(args.cache, name_of(args, layer), validation, p, train=counts, layer=layer,
                                          l2=cfg.l2, seconds=seconds, **where)
            print(path)
        return
    autocast = autocast_dtype("cpu", params.train.mixed_precision)
    p, cost = candidates.finetune_scores(args.backbone, rows, validation, layer=args.layers[0], seed=args.seed,
                                         epochs=args.epochs, lr=args.lr, batch_size=cfg.batch_size, l2=cfg.l2,
                                         warm_start=args.warm_start, autocast=autocast)
    path = candidates.save_scores(args.cache, name_of(args), validation, p, cost=cost, train=counts,
                                  layer=args.layers[0], seed=args.seed, epochs=args.epochs, lr=args.lr,
                                  autocast=str(autocast), warm_start=args.warm_start, **where)
    print(f"{path}: {cost}")


def load_all(cache: Path, validation: list[dict]) -> dict[str, dict]:
    return {p.stem: candidates.read_scores(p, validation) for p in sorted((cache / "scores").glob("*.json"))}


def config_of(name: str) -> str:
    return name.rsplit("_seed", 1)[0]


def layer_of(run: dict) -> int:
    return int(run["layer"])


def table(args) -> dict:
    _, validation = parts(args.limit)
    labels = [r["label"] for r in validation]
    equations = [r["equation"] for r in validation]
    saved = load_all(args.cache, validation)
    if "rule" not in saved:
        raise FileNotFoundError(f"{args.cache}/scores/rule.json: run the `rule` step first (the gated forms need it)")
    rule = saved.pop("rule")
    verdicts = [bool(v) for v in rule["scores"]]
    costs = json.loads((args.cache / "cost.json").read_text()) if (args.cache / "cost.json").exists() else {}

    def ms(layer: int | None) -> float | None:
        """ms per candidate from the `cost` step (every judge timed back to back on the same readings)."""
        key = "parse" if layer is None else f"L{layer}"
        return costs[key]["ms_per_candidate"] if key in costs else None

    def plus(*figures_ms) -> float | None:
        return None if any(m is None for m in figures_ms) else round(sum(figures_ms), 1)

    rows: dict[str, dict] = {}
    tp = sum(v and y for v, y in zip(verdicts, labels))
    rows["rule (today's fallback)"] = {**figures(rule["scores"], labels, equations), "ms_per_candidate": ms(None),
                                      "rule_precision": round(tp / max(1, sum(verdicts)), 4),
                                      "rule_recall": round(tp / max(1, sum(labels)), 4)}
    groups: dict[str, list[dict]] = {}
    for name, s in saved.items():
        groups.setdefault(config_of(name), []).append(s)
    for config, runs in groups.items():
        members = [(r["name"], r["scores"], ms(layer_of(r))) for r in runs]
        if len(runs) > 1:
            mean = [sum(col) / len(col) for col in zip(*(s for _, s, _ in members))]
            members.append((f"{config}_ensemble{len(runs)}", mean, plus(*(m for _, _, m in members))))
        for name, s, cost in members:
            rows[name] = {**figures(s, labels, equations), "ms_per_candidate": cost}
            rows[f"{name} + rule gate"] = {**figures(gated_scores(s, verdicts), labels, equations),
                                           "ms_per_candidate": plus(cost, ms(None))}
    by_shape = {}  # the rule's one point per shape: its figures at a recall rank ties in reading order
    for name in SHAPES:
        idx = [i for i, e in enumerate(equations) if shape(e) == name]
        hit, said, right = (sum(verdicts[i] and labels[i] for i in idx), sum(verdicts[i] for i in idx),
                            sum(labels[i] for i in idx))
        by_shape[name] = {"precision": round(hit / said, 4) if said else None,
                          "recall": round(hit / right, 4) if right else None}
    rows["rule (today's fallback)"]["rule_by_shape"] = by_shape
    scores = _scores_by_row(groups, verdicts)
    versus = {}
    if args.reference in scores:  # each judge against today's, paired on the same readings
        groups_of = [r["group"] for r in validation]
        versus = {name: paired_difference(s, scores[args.reference], labels, groups_of, resamples=args.resamples)
                  for name, s in scores.items() if name != args.reference}
    return {"cpu": rule["cpu"], "threads": rule["threads"], "backbone": rule["backbone"],
            "reference": args.reference, "versus_reference": versus,
            "rule": {k: v for k, v in rule.items() if k not in ("keys", "scores", "parses", "origin")},
            "validation": {"n": len(labels), "right": sum(labels)}, "rows": rows,
            "runs": {name: {k: v for k, v in s.items() if k not in ("keys", "scores")} for name, s in saved.items()},
            "cost": costs}


def _scores_by_row(groups: dict[str, list[dict]], verdicts: list[bool]) -> dict[str, list[float]]:
    """Every row's scores by the table's row name (each run, each ensemble, each gated by the rule)."""
    out = {}
    for config, runs in groups.items():
        members = [(r["name"], r["scores"]) for r in runs]
        if len(runs) > 1:
            members.append((f"{config}_ensemble{len(runs)}", [sum(c) / len(c) for c in zip(*(s for _, s in members))]))
        for name, s in members:
            out[name] = s
            out[f"{name} + rule gate"] = gated_scores(s, verdicts)
    return out


def markdown(result: dict) -> str:
    v = result["validation"]
    lines = [f"Validation readings: {v['n']} ({v['right']} read right). CPU: {result['cpu']}, "
             f"{result['threads']} torch threads, under other jobs' load (each run's load average is in the .json). "
             "Calibration error: 10-bin ECE after Platt scaling fitted on these same readings (in-sample). "
             "ms per candidate: the `cost` step's timing of each judge on the same readings, back to back (a gated "
             "form adds the rule's greedy parse, an ensemble its members).", "",
             "| candidate | AUC | precision at recall 0.3 | precision at recall 0.5 "
             "| calibration error (Platt, in-sample) | ms per candidate |", "|---|---:|---:|---:|---:|---:|"]
    for name, f in result["rows"].items():
        lines.append(f"| {name} | {f['auc']} | {f['precision_at_recall_0.3']} | {f['precision_at_recall_0.5']} | "
                     f"{f['calibration_error_platt_in_sample']} | {f['ms_per_candidate']} |")
    rule = result["rows"]["rule (today's fallback)"]
    lines += ["", f"The rule's one point: precision {rule['rule_precision']} at recall {rule['rule_recall']} (its "
              "figures at recall 0.3 / 0.5 rank ties in reading order and mean little).", "",
              "Precision at recall 0.5 within each equation shape (n readings, right):", "",
              "| candidate | " + " | ".join(SHAPES) + " |", "|---|" + "---:|" * len(SHAPES)]
    first = next(iter(result["rows"].values()))["by_shape"]
    point = rule["rule_by_shape"]
    lines.append("| rule's one point (precision, recall) | " + " | ".join(
        f"{point[s]['precision']}, {point[s]['recall']}" for s in SHAPES) + " |")
    lines.append("| (n, right) | " + " | ".join(f"{first[s]['n']}, {first[s]['right']}" for s in SHAPES) + " |")
    for name, f in result["rows"].items():
        lines.append(f"| {name} | " + " | ".join(str(f["by_shape"][s]["precision_at_recall_0.5"]) for s in SHAPES)
                     + " |")
    if result["versus_reference"]:
        lines += ["", f"Against {result['reference']} (today's judge), paired on the same readings: the difference and "
                  "its 95 % interval from resampling dataset problems:", "",
                  "| candidate | AUC difference | precision at recall 0.5 difference |", "|---|---:|---:|"]
        for name, d in result["versus_reference"].items():
            lines.append(f"| {name} | {d['auc']:+.4f} [{d['auc_ci'][0]:+.3f}, {d['auc_ci'][1]:+.3f}] | "
                         f"{d['precision_at_recall_0.5']:+.4f} [{d['precision_at_recall_0.5_ci'][0]:+.3f}, "
                         f"{d['precision_at_recall_0.5_ci'][1]:+.3f}] |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("rule", "probe", "finetune", "cost", "table"))
    ap.add_argument("--backbone", type=Path, help="the LM folder the judges read with (the fold's evaluator, or the "
                                                  "pre-trained LM)")
    ap.add_argument("--evaluator", type=Path, help="rule: the evaluator that parses (without: the committed "
                                                   "evaluator's recorded parses, candidates.stored_rule_scores)")
    ap.add_argument("--cache", type=Path, default=ROOT / ".cache" / "judge_finetune")
    ap.add_argument("--data", type=Path, default=ROOT / "data", help="processed/ and splits/ (synthetic readings)")
    ap.add_argument("--layers", type=int, nargs="+", default=[12], help="decoder layers a judge keeps (probe: one "
                                                                           "probe each; finetune: the first)")
    ap.add_argument("--cost-rows", type=int, default=64, help="cost: validation readings timed")
    ap.add_argument("--repeats", type=int, default=3, help="cost: timings of each, the fastest kept")
    ap.add_argument("--max-train", type=int, default=0, help="a seeded sample of the training readings (0: all)")
    ap.add_argument("--synthetic", type=int, default=0, help="add this many synthetic readings (synthetic.py)")
    ap.add_argument("--with-corpus", nargs="+", default=[], metavar="NAME",
                    help="add the training readings of these corpora under data/labels that the judge is not fitted "
                         "on (e.g. corpus_round4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=5e-5, help="the layers' rate; the head's is 10 times it")
    ap.add_argument("--warm-start", type=int, default=512, help="training readings whose frozen states fit the "
                                                                  "starting head")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N readings of each part (a smoke run)")
    ap.add_argument("--out", type=Path, help="table: writes <out>.json and <out>.md")
    ap.add_argument("--reference", default="probe_L12_nall + rule gate",
                    help="table: the row every other is compared with (today's judge: layer 12, every training "
                         "reading, gated by the rule)")
    ap.add_argument("--resamples", type=int, default=1000, help="table: bootstrap resamples of dataset problems")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.step == "table":
        result = table(args)
        out = args.out or args.cache / "results"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        out.with_suffix(".md").write_text(markdown(result), encoding="utf-8")
        print(markdown(result))
        return
    if args.backbone is None and args.step != "rule":
        ap.error(f"{args.step} needs --backbone")
    score(args)


if __name__ == "__main__":
    main()
