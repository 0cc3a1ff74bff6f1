"""What "verified: yes" means: a learned judge's verdict held to a precision, per equation shape.

The judge's own threshold (mwpgen/judge/choose.py) is the highest that keeps `judge.recall` of the validation
readings read right: a ranking figure, at which about 4 accepted problems in 10 are wrong. A teacher reads "verified:
yes" as "right", so `mwpgen generate --verify` and the served model say it only at a threshold chosen for
precision: on the validation readings (the judge's own scores of them: p, or the rule-gated scores of a judge gated
by the rule), the lowest threshold t at which every higher cut that accepts at least `min_accepted` readings, t's
included, is at least `target` precise (a cut: the readings scoring at or above a score).

The readings differ by shape (on validation, + and - problems are read right several times as often as / and
two-operator ones), so a threshold chosen on all of them is set by the shapes with most readings and fails the
others. Each shape (mwpgen.data.equation_shapes.equation_shape) gets its own, chosen on its own readings; a shape that
reaches `target` at no cut of `min_accepted` (too few right problems, or too many wrong ones among the best) gets
none: its problems are never "verified", and the output says so. Where every shape's verdicts are `target`
precise, so are all of them together. The figures each choice rests on are kept with the thresholds (judge.json's
`verified`), so what a user may expect per shape is written beside what decides it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mwpgen.data.equation_shapes import SHAPES, equation_shape
from mwpgen.data.equations import EquationError

# What train_judge holds "verified: yes" to: the precision a teacher can read it as (issue "verified means right":
# at least 9 of 10), on at least MIN_ACCEPTED validation readings of the shape. Constants of the product, not of an
# experiment: studies that try other targets call choose_verified with theirs.
PRECISION_TARGET = 0.9
MIN_ACCEPTED = 10


def precision_threshold(scores: Sequence[float], labels: Sequence[int], target: float,
                        min_accepted: int) -> float | None:
    """The lowest score t above 0 (a gated judge scores 0 what the rule rejects: never accepted) such that every cut
    at or above t accepting at least `min_accepted` readings has precision >= `target`, t's own cut accepting at
    least `min_accepted`; None where no cut does."""
    ranked = sorted(((float(s), int(y)) for s, y in zip(scores, labels) if s > 0), key=lambda sy: -sy[0])
    chosen, tp = None, 0
    for i, (score, label) in enumerate(ranked):
        tp += label
        if i + 1 < len(ranked) and ranked[i + 1][0] == score:
            continue  # ties are one cut
        if i + 1 < min_accepted:
            continue
        if tp / (i + 1) < target:
            break
        chosen = score
    return chosen


def cut_figures(scores: Sequence[float], labels: Sequence[int], threshold: float | None) -> dict:
    """Readings, read right, accepted at `threshold` (None: nothing), right among them and their precision."""
    accepted = [y for s, y in zip(scores, labels) if threshold is not None and s >= threshold]
    return {"n": len(labels), "right": int(sum(labels)), "accepted": len(accepted), "tp": int(sum(accepted)),
            "precision": round(sum(accepted) / len(accepted), 4) if accepted else None}


def choose_verified(scores: Sequence[float], labels: Sequence[int], equations: Sequence[str], target: float,
                    min_accepted: int) -> dict:
    """The thresholds "verified: yes" is held to (the module's docstring), from the judge's scores of the
    validation readings, their labels and their equations: {"precision_target", "min_accepted", "thresholds":
    {shape: t or None}, "validation": {shape: cut_figures at its threshold}, "validation_all": the figures of every
    reading at its shape's threshold}."""
    if not len(scores) == len(labels) == len(equations):
        raise ValueError(f"{len(scores)} scores, {len(labels)} labels and {len(equations)} equations: one of each "
                         "per validation reading")
    shapes = [equation_shape(e) for e in equations]
    thresholds: dict[str, float | None] = {}
    figures: dict[str, dict] = {}
    for shape in SHAPES:
        of = [i for i, s in enumerate(shapes) if s == shape]
        scored, read = [scores[i] for i in of], [labels[i] for i in of]
        thresholds[shape] = precision_threshold(scored, read, target, min_accepted)
        if of:
            figures[shape] = cut_figures(scored, read, thresholds[shape])
    verdicts = [thresholds[s] is not None and sc >= thresholds[s] for sc, s in zip(scores, shapes)]
    return {"precision_target": target, "min_accepted": min_accepted, "thresholds": thresholds,
            "validation": figures, "validation_all": cut_figures([float(v) for v in verdicts], labels, 0.5)}


def verified_threshold(verified: dict, fallback: float, equation: str) -> float | None:
    """The threshold a problem written for `equation` is verified at (None: never), from a judge's `verified`
    (choose_verified); a judge saved without one (`{}`) verifies at its own threshold `fallback` for every shape."""
    if not verified:
        return fallback
    try:
        shape = equation_shape(equation)
    except EquationError:
        return None
    return verified["thresholds"].get(shape)


def never_verified_reason(verified: dict, equation: str) -> str:
    """Why problems of `equation`'s shape are never verified, in one sentence for the output."""
    try:
        shape = equation_shape(equation)
    except EquationError:
        return "its equation has no shape the judge was chosen on"
    seen = verified.get("validation", {}).get(shape)
    found = (f"{seen['right']} of {seen['n']} validation readings of its shape are read right" if seen
             else "no validation reading has its shape")
    return (f"equations of shape {shape} are never verified: {found}, and no threshold reached precision "
            f"{verified['precision_target']:g} on at least {verified['min_accepted']} of them")
