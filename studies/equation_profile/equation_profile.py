"""How the three datasets' equations differ (issue 26): operators, size, nesting, constants, and how many of a fold's
test equations have a training-fold twin (the same canonical form), which bounds what a parser learns to read.

    bash scripts/run.sh python -m studies.equation_profile.equation_profile --fold 0 \
        --out studies/equation_profile/equation_profile.md

Reads data/processed/<dataset>.jsonl and data/splits/<dataset>.json (the preprocess and split stages' outputs).
Counts the masked equations as the models see them ("x = ( num1 - num2 ) * 2"): numN tokens are the problem's
numbers, any other number is a constant the equation brings (e.g. 1 in "( num2 - 1 )", 100 for percentages).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path

from mwpgen.data.equations import OPERATORS, canonical_equation, is_num_token, is_number, normalize_equation
from mwpgen.io import atomic_write_text, read_json, read_jsonl

DATASETS = ("arithmetic", "mawps", "math23k")


def shape(equation: str) -> dict:
    """Operators, numN tokens, constants and bracket depth of one masked equation."""
    symbols = normalize_equation(equation)[2:]  # the right-hand side of "x = ..."
    depth = deepest = 0
    for s in symbols:
        depth += (s == "(") - (s == ")")
        deepest = max(deepest, depth)
    return {"operators": [s for s in symbols if s in OPERATORS],
            "nums": len({s for s in symbols if is_num_token(s)}),
            "constants": [s for s in symbols if is_number(s) and not is_num_token(s)], "depth": deepest}


def profile(data: Path, dataset: str, fold: int) -> dict:
    records = list(read_jsonl(data / "processed" / f"{dataset}.jsonl"))
    shapes = [shape(r["equation"]) for r in records]
    n_ops = [len(s["operators"]) for s in shapes]
    ops = Counter(o for s in shapes for o in s["operators"])
    constants = Counter(c for s in shapes for c in s["constants"])
    test_ids = set(read_json(data / "splits" / f"{dataset}.json")["folds"][fold])
    forms = {r["id"]: canonical_equation(r["equation"]) for r in records}
    train_forms = {f for i, f in forms.items() if i not in test_ids}
    test = [forms[i] for i in test_ids if i in forms]
    templates = Counter(forms.values())
    return {
        "dataset": dataset,
        "problems": len(records),
        "operators_mean": statistics.fmean(n_ops),
        "operators_share": {k: sum(n == k for n in n_ops) / len(n_ops) for k in (1, 2, 3)}
        | {"4+": sum(n >= 4 for n in n_ops) / len(n_ops)},
        "operator_mix": {o: ops[o] / sum(ops.values()) for o in sorted(OPERATORS)},
        "nums_mean": statistics.fmean(s["nums"] for s in shapes),
        "with_constant": sum(bool(s["constants"]) for s in shapes) / len(shapes),
        "top_constants": constants.most_common(5),
        "bracketed": sum(s["depth"] > 0 for s in shapes) / len(shapes),
        "templates": len(templates),
        "top10_templates_share": sum(c for _, c in templates.most_common(10)) / len(records),
        "fold": fold,
        "test": len(test),
        "test_form_in_training": sum(f in train_forms for f in test) / len(test),
    }


def markdown(rows: list[dict]) -> str:
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731 — a one-line local helper
    lines = [f"### The datasets' equations (masked, as the models see them); test fold {rows[0]['fold']}", "",
             "| | " + " | ".join(r["dataset"] for r in rows) + " |", "|---|" + "---:|" * len(rows)]
    cells = [
        ("problems", lambda r: f"{r['problems']:,}"),
        ("operators per equation (mean)", lambda r: f"{r['operators_mean']:.2f}"),
        ("1 / 2 / 3 / 4+ operators", lambda r: " / ".join(pct(v) for v in r["operators_share"].values())),
        ("operator mix + − × ÷ ^", lambda r: " / ".join(pct(r["operator_mix"][o]) for o in "+-*/^")),
        ("problem numbers used (mean)", lambda r: f"{r['nums_mean']:.2f}"),
        ("equations with a constant", lambda r: pct(r["with_constant"])),
        ("most used constants", lambda r: ", ".join(f"{c} ({n})" for c, n in r["top_constants"]) or "none"),
        ("equations with brackets", lambda r: pct(r["bracketed"])),
        ("distinct equation forms", lambda r: f"{r['templates']:,}"),
        ("problems under the 10 commonest forms", lambda r: pct(r["top10_templates_share"])),
        ("test equations whose form is in the training fold", lambda r: pct(r["test_form_in_training"])),
    ]
    lines += [f"| {name} | " + " | ".join(cell(r) for r in rows) + " |" for name, cell in cells]
    return "\n".join(lines) + "\n"


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--data", type=Path, default=Path("data"))
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    cli.add_argument("--out", type=Path, help="write the table here (markdown)")
    args = cli.parse_args()
    table = markdown([profile(args.data, d, args.fold) for d in args.datasets])
    print(table)
    if args.out:
        atomic_write_text(args.out, table)


if __name__ == "__main__":
    main()
