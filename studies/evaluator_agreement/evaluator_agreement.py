"""How far ACC-eq can be trusted: the evaluator's verdicts against a person's, on generated problems of a run.

    # sample, then label by reading; then precision and recall:
    python -m studies.evaluator_agreement.evaluator_agreement sample --out data/labels/evaluator/labels.csv
    python -m studies.evaluator_agreement.evaluator_agreement score --labels data/labels/evaluator/labels.csv

`sample` draws problems (seeded, the same number from each generator of params.yaml's `models.generate`) from the
`evaluate` stage's predictions of one (dataset, fold) and writes them WITHOUT the evaluator's parse, so labelling
is blind to it; the `label` column is filled by hand, 1 when the problem encodes its equation, 0 when not (the rule:
data/labels/evaluator/README.md). `score` joins the labels with the evaluator's verdicts (exact match, and
equivalent) and reports precision (of the problems the evaluator accepts, how many do encode the equation) and
recall (of those that do, how many it accepts), overall and per generator, as JSON and a markdown table.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

from mwpgen.config.schema import load_params
from mwpgen.io import read_jsonl
from mwpgen.paths import FoldPaths

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = ["model", "id", "equation", "generated", "label"]


def predictions(model: str, dataset: str, fold: int) -> list[dict]:
    path = FoldPaths(ROOT, model, dataset, fold).predictions
    return read_jsonl(path) if path.exists() else []


def sample(out: Path, n: int, seed: int, dataset: str, fold: int) -> None:
    if out.exists():  # its label column is filled in place: a new sample would overwrite the readings
        raise SystemExit(f"error: {out} already exists (its labels are read into it); sample into a new file")
    models = [m for m in load_params(ROOT / "params.yaml").models.generate if predictions(m, dataset, fold)]
    rng = random.Random(seed)
    rows = []
    for i, model in enumerate(models):
        share = n // len(models) + (i < n % len(models))
        for p in rng.sample(predictions(model, dataset, fold), share):
            rows.append({"model": model, "id": p["id"], "equation": p["equation"], "generated": p["generated"],
                         "label": ""})
    rng.shuffle(rows)  # the order says nothing about the model either
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} problems from {', '.join(models)} -> {out}")


def rates(pairs: list[tuple[bool, bool]]) -> dict:
    """pairs of (evaluator accepts, person says it encodes the equation)."""
    tp = sum(a and h for a, h in pairs)
    accepted, encoded = sum(a for a, _ in pairs), sum(h for _, h in pairs)
    return {"n": len(pairs), "encoded": encoded, "accepted": accepted, "both": tp,
            "precision": round(tp / accepted, 3) if accepted else None,
            "recall": round(tp / encoded, 3) if encoded else None,
            "agreement": round(sum(a == h for a, h in pairs) / len(pairs), 3) if pairs else None}


def score(labels_path: Path, dataset: str, fold: int) -> dict:
    with open(labels_path, newline="") as f:
        labels = list(csv.DictReader(f))
    for line, row in enumerate(labels, start=2):
        if row["label"].strip() not in ("0", "1"):
            raise SystemExit(f"error: {labels_path}:{line}: label must be 0 or 1, got {row['label']!r}")
    verdicts = {}
    for model in {r["model"] for r in labels}:
        for p in predictions(model, dataset, fold):
            verdicts[model, p["id"]] = p
    shown = labels_path.relative_to(ROOT) if labels_path.is_relative_to(ROOT) else labels_path
    result = {"labels": str(shown), "dataset": dataset, "fold": fold}
    for kind, key in (("exact", "acc_eq"), ("equivalent", "acc_eq_equivalent")):
        pairs = {m: [] for m in sorted({r["model"] for r in labels})}
        for r in labels:
            p = verdicts.get((r["model"], r["id"]))
            if p is None or p["generated"] != r["generated"]:
                raise SystemExit(f"error: {labels_path}: {r['model']} problem {r['id']} is not in the current "
                                 "predictions (labels belong to another run)")
            pairs[r["model"]].append((bool(p[key]), r["label"].strip() == "1"))
        result[kind] = {"all": rates([x for v in pairs.values() for x in v]),
                        "per_model": {m: rates(v) for m, v in pairs.items()}}
    return result


def markdown(result: dict) -> str:
    lines = [f"Evaluator verdicts against hand labels ({result['labels']}, {result['dataset']} fold {result['fold']})",
             "", "| verdict | generator | n | encoded (labels) | accepted (evaluator) | both | precision | recall |",
             "|---|---|---|---|---|---|---|---|"]
    for kind in ("exact", "equivalent"):
        rows = [("all", result[kind]["all"]), *result[kind]["per_model"].items()]
        for model, r in rows:
            lines.append(f"| {kind} | {model} | {r['n']} | {r['encoded']} | {r['accepted']} | {r['both']} | "
                         f"{r['precision']} | {r['recall']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = cli.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--n", type=int, default=100)
    s.add_argument("--seed", type=int, default=2021)
    c = sub.add_parser("score")
    c.add_argument("--labels", type=Path, required=True)
    for p in (s, c):
        p.add_argument("--dataset", default="arithmetic")
        p.add_argument("--fold", type=int, default=0)
    args = cli.parse_args()
    if args.command == "sample":
        sample(args.out, args.n, args.seed, args.dataset, args.fold)
    else:
        result = score(args.labels.resolve(), args.dataset, args.fold)
        out = args.labels.with_name("agreement")
        out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        out.with_suffix(".md").write_text(markdown(result))
        print(markdown(result))


if __name__ == "__main__":
    main()
