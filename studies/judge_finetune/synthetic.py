"""Synthetic readings from the training fold's own reference problems: each problem paired with its own equation
(label 1) and with a perturbed one (label 0).

A reference problem encodes its equation by construction, and a small edit of the equation makes a pair a careful
reader would label 0 by data/labels/evaluator/README.md's rule: the question asks for something the equation does
not compute (an operator swapped), the order of a - or / is reversed (num1/num2 swapped), or a number of the problem
has no role / a step is missing (an operand dropped or added). These are the errors the learned judge misses most
(studies/learned_judge: "an operation against the story"). Only training-fold problems of the labelled fold are used
(never its validation slice or test fold), so no text a judge is chosen or measured on is trained on.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from mwpgen.data.equations import canonical_equation, is_num_token
from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import equation_symbols

OPERATORS = ("+", "-", "*", "/")
PERTURBATIONS = ("operator", "order", "drop", "add")


def swap_operator(symbols: list[str], rng: random.Random) -> list[str] | None:
    at = [i for i, s in enumerate(symbols) if s in OPERATORS]
    if not at:
        return None
    i = rng.choice(at)
    return symbols[:i] + [rng.choice([o for o in OPERATORS if o != symbols[i]])] + symbols[i + 1:]


def swap_order(symbols: list[str], rng: random.Random) -> list[str] | None:
    """The two numbers around a - or / exchanged (for + and * that is the same equation, so never there)."""
    at = [i for i, s in enumerate(symbols) if s in ("-", "/") and 0 < i < len(symbols) - 1
          and is_num_token(symbols[i - 1]) and is_num_token(symbols[i + 1]) and symbols[i - 1] != symbols[i + 1]]
    if not at:
        return None
    i = rng.choice(at)
    out = list(symbols)
    out[i - 1], out[i + 1] = out[i + 1], out[i - 1]
    return out


def drop_operand(symbols: list[str], rng: random.Random) -> list[str] | None:
    """One `op numK` (or `numK op`) at the edge of the right-hand side removed: a step or a number lost."""
    rhs = symbols[2:]
    choices = []
    if len(rhs) >= 3 and rhs[-2] in OPERATORS and is_num_token(rhs[-1]):
        choices.append(symbols[:-2])
    if len(rhs) >= 3 and is_num_token(rhs[0]) and rhs[1] in OPERATORS:
        choices.append(symbols[:2] + rhs[2:])
    return rng.choice(choices) if choices else None


def add_operand(symbols: list[str], rng: random.Random, numbers: list[str]) -> list[str] | None:
    """An `op numK` appended: a number of the problem the equation leaves out if there is one, else one it uses."""
    unused = [n for n in numbers if n not in symbols]
    pool = unused or [s for s in symbols if is_num_token(s)]
    if not pool:
        return None
    rhs = symbols[2:]
    wrapped = ["("] + rhs + [")"] if any(s in OPERATORS for s in rhs) else rhs
    return symbols[:2] + wrapped + [rng.choice(OPERATORS), rng.choice(pool)]


def perturb(equation: str, problem: str, rng: random.Random) -> tuple[str, str] | None:
    """(a perturbed equation that differs from `equation` symbol for symbol, the perturbation's name), or None."""
    symbols = equation.split()
    numbers = sorted(set(re.findall(r"\bnum\d+\b", problem)), key=lambda n: int(n[3:]))
    kinds = list(PERTURBATIONS)
    rng.shuffle(kinds)
    for kind in kinds:
        edited = {"operator": lambda: swap_operator(symbols, rng), "order": lambda: swap_order(symbols, rng),
                  "drop": lambda: drop_operand(symbols, rng), "add": lambda: add_operand(symbols, rng, numbers)}[kind]()
        if edited is not None:
            out = canonical_equation(" ".join(edited))
            if equation_symbols(out) != equation_symbols(equation):
                return out, kind
    return None


def synthetic_readings(data_dir: Path, dataset: str, fold: int, seed: int, validation_size: int) -> list[dict]:
    """Two readings per training-fold problem (its own equation, 1; a perturbed one, 0), in the readings' layout
    (`group`: the problem's id; `source`: "synthetic"; `perturbation`: what was changed)."""
    records = load_fold(data_dir, dataset, fold, seed=seed, validation_size=validation_size).train
    rng = random.Random(f"{seed}:{dataset}:{fold}:synthetic")
    out = []
    for r in records:
        equation = canonical_equation(r["equation"])
        out.append({"equation": equation, "problem": r["text"], "label": 1, "group": r["id"], "source": "synthetic",
                    "perturbation": None})
        wrong = perturb(equation, r["text"], rng)
        if wrong is not None:
            out.append({"equation": wrong[0], "problem": r["text"], "label": 0, "group": r["id"],
                        "source": "synthetic", "perturbation": wrong[1]})
    return out
