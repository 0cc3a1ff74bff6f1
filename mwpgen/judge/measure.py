"""How well a judge's scores and verdicts agree with blind readings: AUC, precision at a recall, the threshold that
reaches a recall, precision and recall at a threshold, and precision and recall of yes/no verdicts with bootstrap
intervals over dataset problems.

The stages that choose a judge (train_judge, on `validation` readings) and measure it (measure_judge, on `validation`
and `test` readings) read the same figures from here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def rounded_figure(x: float | None) -> float | None:
    """A figure as the metrics files write it: 4 places, None where it is not computable (NaN)."""
    return None if x is None or math.isnan(x) else round(float(x), 4)


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """P(a right problem scores above a wrong one), ties half (Mann-Whitney, by ranks)."""
    pairs = sorted(zip(scores, labels))
    n_pos = sum(labels)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return math.nan
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # ranks i+1..j share their mean
        rank_sum += mid * sum(y for _, y in pairs[i:j])
        i = j
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def precision_at_recall(scores: Sequence[float], labels: Sequence[int], recall: float = 0.5) -> float:
    """The precision of the highest-scoring problems that hold `recall` of the right ones."""
    ranked = sorted(zip(scores, labels), key=lambda t: -t[0])
    need, tp = recall * sum(labels), 0
    for k, (_, y) in enumerate(ranked, start=1):
        tp += y
        if tp >= need:
            return tp / k
    return math.nan


def threshold_at_recall(scores: Sequence[float], labels: Sequence[int], recall: float) -> float:
    """The highest threshold that accepts at least `recall` of the right problems."""
    right = sorted((s for s, y in zip(scores, labels) if y), reverse=True)
    if not right:
        return 1.0
    return right[max(0, math.ceil(recall * len(right)) - 1)]


def precision_recall(scores: Sequence[float], labels: Sequence[int], threshold: float) -> dict:
    tp = sum(s >= threshold and y == 1 for s, y in zip(scores, labels))
    fp = sum(s >= threshold and y == 0 for s, y in zip(scores, labels))
    positives = sum(labels)
    return {"threshold": threshold, "precision": tp / (tp + fp) if tp + fp else math.nan,
            "recall": tp / positives if positives else math.nan, "accepted": tp + fp}


def measure(scores: Sequence[float], labels: Sequence[int], threshold: float) -> dict:
    """A judge's probabilities against readings: AUC, precision at recall 0.5, and precision and recall at its
    threshold (None where not computable: no reading of a class, nothing accepted)."""
    at = precision_recall(scores, labels, threshold)
    return {"n": len(labels), "right": int(sum(labels)), "auc": rounded_figure(auc(scores, labels)),
            "precision_at_recall_0.5": rounded_figure(precision_at_recall(scores, labels, 0.5)),
            "threshold": round(float(threshold), 6), "precision": rounded_figure(at["precision"]),
            "recall": rounded_figure(at["recall"]), "accepted": at["accepted"]}


def _counts(pairs: Sequence[tuple[bool, int]]) -> tuple[int, int, int]:
    """(true positives, accepted, consistent) of (verdict, label) pairs."""
    return sum(v and y for v, y in pairs), sum(v for v, _ in pairs), sum(y for _, y in pairs)


def _ratios(tp: int, accepted: int, positive: int) -> tuple[float | None, float | None]:
    return (tp / accepted if accepted else None), (tp / positive if positive else None)


def verdict_quality(verdicts: Sequence[bool], labels: Sequence[int], seed: int, resamples: int = 1000,
                    groups: Sequence[str] | None = None) -> dict:
    """Precision and recall of yes/no verdicts against reading labels, with 95 % percentile bootstrap intervals (a
    resample without an accepted or a consistent problem gives no value for that ratio). With `groups` (the dataset
    problem each reading was written for) the resamples draw groups, each with all its readings: the candidates of
    one problem share most of their text and are judged alike, so drawing readings one by one would treat them as
    independent and narrow the intervals. Without, readings are drawn one by one."""
    pairs = list(zip(map(bool, verdicts), labels))
    if groups is not None and len(groups) != len(pairs):
        raise ValueError(f"{len(groups)} groups for {len(pairs)} verdicts")
    clusters: dict[str, list[tuple[bool, int]]] = {}
    for i, pair in enumerate(pairs):
        clusters.setdefault(groups[i] if groups is not None else str(i), []).append(pair)
    units = list(clusters.values())
    tp, accepted, positive = _counts(pairs)
    precision, recall = _ratios(tp, accepted, positive)
    rng = random.Random(seed)
    drawn: dict[str, list[float]] = {"precision": [], "recall": []}
    for _ in range(resamples if pairs else 0):
        p, r = _ratios(*_counts([pair for _ in units for pair in units[rng.randrange(len(units))]]))
        for name, value in (("precision", p), ("recall", r)):
            if value is not None:
                drawn[name].append(value)

    def interval(values: list[float]) -> list[float] | None:
        if not values:
            return None
        values.sort()
        return [round(values[int(0.025 * (len(values) - 1))], 4), round(values[int(0.975 * (len(values) - 1))], 4)]

    return {"precision": precision, "recall": recall, "precision_ci": interval(drawn["precision"]),
            "recall_ci": interval(drawn["recall"]), "accepted": accepted, "tp": tp, "fp": accepted - tp,
            "fn": positive - tp}
