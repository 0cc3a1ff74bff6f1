"""The comparison's figures of one candidate's validation scores: AUC, precision at recall 0.3 and 0.5, calibration
error after Platt scaling (fitted on the same validation readings: in-sample), and precision at recall 0.5 per
equation shape."""

from __future__ import annotations

import math
from typing import Sequence

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
