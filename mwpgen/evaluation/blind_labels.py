"""Blind labels of generated problems (data/labels/judge): what a judge of consistency is measured against.

Readers labelled each problem by the rule of data/labels/evaluator/README.md (1: solving it as written computes its
equation) seeing only (equation, problem). Every problem belongs to one part: "dev" (written for validation
equations; the only labels a judge may be fitted or tuned on) or "test" (written for test equations; they only
measure). All of them were generated on LABELLED_FOLD, whose evaluator is the judge's parser.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path
from typing import Sequence

LABELLED_FOLD = ("arithmetic", 0)  # the (dataset, fold) every labelled problem was generated on
FIRST_READING = ("labels_a.csv", "labels_b.csv", "labels_c.csv", "labels_d.csv")  # four readers, a quarter each
SECOND_READING = "labels_e.csv"  # the overlap, read again by a fifth reader who saw no other label
PARTS = ("dev", "test")


def measurement_paths(root: Path, dataset: str, fold: int) -> tuple[Path, Path]:
    """Where the measure_judge stage writes a fold's measurement: (its metrics JSON, the per-problem verdicts)."""
    name = Path(dataset) / f"fold{fold}"
    return root / "metrics" / "judge" / f"{name}.json", root / "results" / "judge" / f"{name}.jsonl"


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def readings(*paths: Path) -> dict[str, int]:
    """uid -> label (0 or 1) from labels CSVs; a label that is neither is an error naming file and line."""
    out: dict[str, int] = {}
    for path in paths:
        for line, row in enumerate(read_csv(path), start=2):
            if row.get("label") not in ("0", "1"):
                raise ValueError(f"{path}:{line}: label must be 0 or 1, got {row.get('label')!r} (uid {row.get('uid')})")
            out[row["uid"]] = int(row["label"])
    return out


def read_labels(folder: Path) -> list[dict]:
    """Every labelled problem (uid, equation, problem, part, label, group) in problems.csv's order, by its first
    reading; `group`: the dataset problem it was written for (sources.csv's dataset_id)."""
    label = readings(*(folder / f for f in FIRST_READING))
    sources = {r["uid"]: r for r in read_csv(folder / "sources.csv")}
    missing = [c for c in ("uid", "part", "dataset_id") if sources and c not in next(iter(sources.values()))]
    if missing:  # the intervals resample dataset problems: a reading without one cannot be placed
        raise ValueError(f"{folder / 'sources.csv'}: no column {', '.join(repr(c) for c in missing)}")
    rows = read_csv(folder / "problems.csv")
    for line, r in enumerate(rows, start=2):
        if r["uid"] not in label or sources.get(r["uid"], {}).get("part") not in PARTS:
            what = "no label in " + ", ".join(FIRST_READING) if r["uid"] not in label else "no part in sources.csv"
            raise ValueError(f"{folder / 'problems.csv'}:{line}: problem {r['uid']} has {what}")
    return [{**r, "part": sources[r["uid"]]["part"], "label": label[r["uid"]], "group": sources[r["uid"]]["dataset_id"]}
            for r in rows]


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
