"""Tiny synthetic Arithmetic problems (three templates: +, -, *) for the end-to-end tests and the fold scenario
(tests/helpers/fold_scenario.py, benchmarks/bench_folds.py)."""

from __future__ import annotations

import random

TEMPLATES = [
    ("{a} has num1 {o} . {b} gives {a} num2 more {o} . How many {o} does {a} have now ?", "x = num1 + num2"),
    ("{a} had num1 {o} . {a} gave num2 {o} to {b} . How many {o} does {a} have left ?", "x = num1 - num2"),
    ("{a} buys num1 boxes of {o} . Each box holds num2 {o} . How many {o} does {a} have ?", "x = num1 * num2"),
]
NAMES, OBJECTS = ["Joan", "Sam", "Mike", "Sara", "Tim"], ["apples", "pencils", "marbles", "cookies"]


def synthetic_records(n: int = 40, id_prefix: str = "") -> list[dict]:
    """`id_prefix`: for a scratch project that keeps the real blind readings, whose problems are real Arithmetic ids
    (a synthetic "4" would be taken for the real problem 4 by the leakage checks)."""
    rng = random.Random(0)
    out = []
    for i in range(n):
        template, equation = TEMPLATES[i % len(TEMPLATES)]
        a, b = rng.sample(NAMES, 2)
        text = template.format(a=a, b=b, o=rng.choice(OBJECTS))
        out.append({"id": f"{id_prefix}{i + 1}", "dataset": "arithmetic", "text": text, "equation": equation,
                    "numbers": ["3", "4"], "source_text": text, "source_equation": equation})
    return out
