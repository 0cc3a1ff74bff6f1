"""Where the evaluator's oracle ACC-eq is lost: its parse of every real test problem, each miss sorted into one
kind, and the accuracy by the size of the reference equation.

Kinds of a parse that is not the reference (first that applies):
- equivalent: symbolically the reference (`num2 + num1` for `num1 + num2`); ACC-eq (equivalent) counts it;
- malformed: not a well-formed single-unknown equation;
- other numbers: its `num` tokens (as a multiset) differ from the reference's: a number missed, added or wrong;
- other operators: the same numbers, but its operators (as a multiset) differ: e.g. `-` for `+`;
- operand order: the same numbers and operators in a non-equivalent order: e.g. `num2 - num1` for `num1 - num2`.

    python -m studies.evaluator_errors.evaluator_errors data/oracle/arithmetic/fold0.jsonl \
        --out studies/evaluator_errors

Reads the parses the `train_evaluator` stage wrote for the oracle row (data/oracle/<dataset>/fold<k>.jsonl), or any
jsonl with `equation` and `parsed` (e.g. studies/gpu/default-profile/oracle.jsonl). Writes <out>/evaluator_errors.json
and .md.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from mwpgen.data.equations import OPERATORS, EquationError, equivalent, is_num_token, normalize_equation
from mwpgen.evaluation.metrics import equation_symbols
from mwpgen.io import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("correct", "equivalent", "malformed", "other numbers", "other operators", "operand order")


def kind_of(parsed: str, reference: str) -> str:
    if equation_symbols(parsed) == equation_symbols(reference):  # the exact ACC-eq's rule
        return "correct"
    if equivalent(parsed, reference):
        return "equivalent"
    try:
        got = normalize_equation(parsed)
    except EquationError:
        return "malformed"
    want = normalize_equation(reference)
    if Counter(s for s in got if is_num_token(s)) != Counter(s for s in want if is_num_token(s)):
        return "other numbers"
    if Counter(s for s in got if s in OPERATORS) != Counter(s for s in want if s in OPERATORS):
        return "other operators"
    return "operand order"


def operator_count(equation: str) -> int:
    return sum(s in OPERATORS for s in normalize_equation(equation))


def analyse(rows: list[dict]) -> dict:
    kinds = [kind_of(r["parsed"], r["equation"]) for r in rows]
    by_size: dict[int, list[str]] = {}
    for r, k in zip(rows, kinds):
        by_size.setdefault(operator_count(r["equation"]), []).append(k)
    n = len(rows)
    return {"n": n, "acc_eq": kinds.count("correct") / n,
            "acc_eq_equivalent": (kinds.count("correct") + kinds.count("equivalent")) / n,
            "kinds": {k: kinds.count(k) for k in KINDS},
            "by_operators": {size: {"n": len(ks), "acc_eq": ks.count("correct") / len(ks),
                                    "acc_eq_equivalent": (ks.count("correct") + ks.count("equivalent")) / len(ks)}
                             for size, ks in sorted(by_size.items())}}


def markdown(result: dict, source: str) -> str:
    n = result["n"]
    lines = [f"The evaluator's parse of the {n} real test problems ({source}): ACC-eq {result['acc_eq']:.3f}, "
             f"equivalent {result['acc_eq_equivalent']:.3f}.", "", "| parse | problems | share |", "|---|---:|---:|"]
    lines += [f"| {k} | {c} | {c / n:.3f} |" for k, c in result["kinds"].items()]
    lines += ["", "| operators in the reference equation | problems | ACC-eq | ACC-eq (equivalent) |",
              "|---:|---:|---:|---:|"]
    lines += [f"| {size} | {s['n']} | {s['acc_eq']:.3f} | {s['acc_eq_equivalent']:.3f} |"
              for size, s in result["by_operators"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parses", type=Path, help="jsonl of the evaluator's parses (equation, parsed)")
    ap.add_argument("--out", type=Path, default=ROOT / "studies" / "evaluator_errors")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, source = read_jsonl(args.parses), str(args.parses)
    result = {"source": source, **analyse(rows)}
    (args.out / "evaluator_errors.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "evaluator_errors.md").write_text(markdown(result, source), encoding="utf-8")
    print(markdown(result, source), end="")


if __name__ == "__main__":
    main()
