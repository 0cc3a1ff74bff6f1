"""The comparison's figures of one candidate's validation scores: AUC, precision at recall 0.3 and 0.5, calibration
error after Platt scaling (fitted on the same validation readings: in-sample), and precision at recall 0.5 per
equation shape."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from mwpgen.judge.fit import logistic_regression
from mwpgen.judge.measure import auc, precision_at_recall, rounded_figure
from studies.learned_judge.compare import calibration_error

RECALLS = (0.3, 0.5)
SHAPES = ("+", "-", "*", "/", "two or more")
EPS = 1e-6  # a score of 0 or 1 (the rule's verdicts, a gated score) has no finite logit


def shape(equation: str) -> str:
    """The equation's shape: its one operator, or "two or more"."""
    ops = [s for s in equation.split() if s in ("+", "-", "*", "/")]
    return ops[0] if len(ops) == 1 else "two or more" if ops else "none"


def logit(q: float) -> float:
    q = min(max(float(q), EPS), 1 - EPS)
    return math.log(q / (1 - q))


def platt(scores: Sequence[float], labels: Sequence[int]) -> list[float]:
    """Scores mapped through sigmoid(a * logit(s) + b), a and b fitted by logistic regression on the same readings
    (a negligible L2 keeps a separable set finite). The ranking is unchanged, so only the calibration error moves."""
    x = torch.tensor([[logit(s)] for s in scores], dtype=torch.float64)
    w, mean, std = logistic_regression(x, torch.tensor(list(labels)), l2=1e-3)
    z = (x - mean) / std
    return torch.sigmoid(z[:, 0] * w[0] + w[1]).tolist()


def figures(scores: Sequence[float], labels: Sequence[int], equations: Sequence[str]) -> dict:
    out = {"auc": rounded_figure(auc(scores, labels))}
    for r in RECALLS:
        out[f"precision_at_recall_{r}"] = rounded_figure(precision_at_recall(scores, labels, r))
    out["calibration_error_raw"] = rounded_figure(calibration_error(list(scores), list(labels)))
    out["calibration_error_platt_in_sample"] = rounded_figure(calibration_error(platt(scores, labels), list(labels)))
    by_shape = {}
    for name in SHAPES:
        idx = [i for i, e in enumerate(equations) if shape(e) == name]
        ys = [labels[i] for i in idx]
        by_shape[name] = {"n": len(idx), "right": sum(ys),
                          "precision_at_recall_0.5": rounded_figure(precision_at_recall([scores[i] for i in idx],
                                                                                        ys, 0.5)) if sum(ys) else None}
    out["by_shape"] = by_shape
    return out


def paired_difference(a: Sequence[float], b: Sequence[float], labels: Sequence[int], groups: Sequence[str], *,
                      resamples: int = 1000, seed: int = 0) -> dict:
    """a's figure minus b's (AUC; precision at recall 0.5) on the same readings, with a 95 % percentile interval
    from resampling dataset problems (a reading's group, all its readings together: the candidates of one problem
    are judged alike, so drawing readings one by one would narrow the interval)."""
    import random

    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    units = list(by_group.values())
    rng = random.Random(seed)

    def both(idx: list[int]) -> tuple[float, float]:
        y = [labels[i] for i in idx]
        return (auc([a[i] for i in idx], y) - auc([b[i] for i in idx], y),
                precision_at_recall([a[i] for i in idx], y, 0.5) - precision_at_recall([b[i] for i in idx], y, 0.5))

    point = both(list(range(len(labels))))
    drawn: list[tuple[float, float]] = []
    for _ in range(resamples):
        idx = [i for _ in units for i in units[rng.randrange(len(units))]]
        d = both(idx)
        if not any(math.isnan(x) for x in d):
            drawn.append(d)

    def interval(k: int) -> list[float]:
        values = sorted(d[k] for d in drawn)
        return [round(values[int(0.025 * (len(values) - 1))], 4), round(values[int(0.975 * (len(values) - 1))], 4)]

    return {"auc": round(point[0], 4), "auc_ci": interval(0), "precision_at_recall_0.5": round(point[1], 4),
            "precision_at_recall_0.5_ci": interval(1), "resamples": len(drawn)}
