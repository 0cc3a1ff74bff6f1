"""Deterministic 5-fold cross-validation splits (MAWPS, Math23K) and Roy & Roth's published folds (Arithmetic).

Why group duplicates: MAWPS has exact-duplicate problem texts, and after number masking many more texts become
identical. If copies land in different folds, test problems are seen in training and the generation scores are
inflated. Seeded folds therefore assign whole duplicate groups; published folds are kept as published (so the
split stays comparable with Roy & Roth and the paper) and their leaks are reported instead.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mwpgen.io import write_json

METHODS = ("seeded", "roy_roth")


def normalise_text(text: str) -> str:
    """Duplicate-detection key: lowercase with runs of whitespace collapsed to one space."""
    return re.sub(r"\s+", " ", text.lower()).strip()


def id_sort_key(rid: str) -> tuple:
    """Numeric ids in numeric order ("2" < "10"), then any other ids as strings."""
    return (0, int(rid), "") if rid.isdigit() else (1, 0, rid)


def duplicate_groups(records: Sequence[dict]) -> list[list[str]]:
    """Ids grouped by normalised text (each group sorted); groups ordered by their first id. Ids must be unique."""
    groups: dict[str, list[str]] = {}
    seen: set[str] = set()
    for r in records:
        rid = str(r["id"])
        if rid in seen:
            raise ValueError(f"duplicate record id {rid!r}")
        seen.add(rid)
        groups.setdefault(normalise_text(r["text"]), []).append(rid)
    return sorted((sorted(g, key=id_sort_key) for g in groups.values()), key=lambda g: id_sort_key(g[0]))


def seeded_folds(records: Sequence[dict], n_folds: int, seed: int) -> list[list[str]]:
    """Split record ids into `n_folds` test folds, keeping duplicate texts together and sizes balanced.

    Groups are put in a seeded random order (from a canonical order, so input order does not matter), then
    assigned largest first to the currently smallest fold, ties broken by the seeded generator. Each fold's
    ids are returned sorted.
    """
    if n_folds < 2:
        raise ValueError(f"n_folds must be >= 2, got {n_folds}")
    groups = duplicate_groups(records)
    if len(groups) < n_folds:
        raise ValueError(f"{len(groups)} distinct problem texts cannot fill {n_folds} folds")
    rng = random.Random(seed)
    rng.shuffle(groups)
    groups.sort(key=len, reverse=True)  # stable: equal-size groups keep their seeded order
    folds: list[list[str]] = [[] for _ in range(n_folds)]
    for group in groups:
        smallest = min(len(f) for f in folds)
        k = rng.choice([i for i, f in enumerate(folds) if len(f) == smallest])
        folds[k].extend(group)
    return [sorted(f, key=id_sort_key) for f in folds]


@dataclass
class GivenFoldsReport:
    """What happened to published folds when restricted to the processed records."""

    n_given: int  # ids in the published folds
    n_kept: int  # of those, present in the records
    dropped_ids: list[str] = field(default_factory=list)  # in the folds, not in the records (e.g. quarantined)
    leak_groups: list[dict] = field(default_factory=list)  # {"ids": [...], "folds": [...]} duplicates that straddle

    @property
    def n_leak_groups(self) -> int:
        return len(self.leak_groups)

    @property
    def n_leak_ids(self) -> int:
        return sum(len(g["ids"]) for g in self.leak_groups)


def given_folds(records: Sequence[dict], folds: Sequence[Iterable]) -> tuple[list[list[str]], GivenFoldsReport]:
    """Restrict published folds to the ids present in `records`, and report duplicate texts split across folds.

    Leaking duplicates are NOT moved: moving them would change the published split that results are compared
    on. Raises ValueError if an id is in two folds or a record is in no fold (the split would not be a partition).
    """
    fold_of: dict[str, int] = {}
    for k, fold in enumerate(folds):
        for rid in map(str, fold):
            if rid in fold_of:
                raise ValueError(f"id {rid!r} is in folds {fold_of[rid]} and {k}")
            fold_of[rid] = k
    present = [str(r["id"]) for r in records]
    missing = [rid for rid in present if rid not in fold_of]
    if missing:
        raise ValueError(f"{len(missing)} records are in no published fold, e.g. {missing[:5]}")
    present_set = set(present)
    kept = [sorted((str(i) for i in fold if str(i) in present_set), key=id_sort_key) for fold in folds]
    report = GivenFoldsReport(
        n_given=len(fold_of), n_kept=len(present),
        dropped_ids=sorted((rid for rid in fold_of if rid not in present_set), key=id_sort_key),
    )
    for group in duplicate_groups(records):
        where = sorted({fold_of[rid] for rid in group})
        if len(where) > 1:
            report.leak_groups.append({"ids": group, "folds": where})
    return kept, report


def fold_train_test(records: Sequence[dict], folds: Sequence[Sequence[str]], k: int) -> tuple[list[dict], list[dict]]:
    """(training records, test records) for fold k: test = folds[k]; input order kept.

    Train = every other record whose normalised text is not also a test text. Seeded folds never need that
    filter (duplicates share a fold), but published folds (Arithmetic) can split a duplicate group, and a test
    problem must never be seen in training.
    """
    if not 0 <= k < len(folds):
        raise IndexError(f"fold {k} out of range for {len(folds)} folds")
    test_ids = set(map(str, folds[k]))
    test = [r for r in records if str(r["id"]) in test_ids]
    test_texts = {normalise_text(r["text"]) for r in test}
    train = [r for r in records if str(r["id"]) not in test_ids and normalise_text(r["text"]) not in test_texts]
    return train, test


def check_partition(folds: Sequence[Sequence[str]], ids: Iterable[str]) -> None:
    """Raise ValueError unless every id is in exactly one fold and folds hold nothing else."""
    flat = [str(i) for f in folds for i in f]
    if len(flat) != len(set(flat)):
        raise ValueError("an id is in more than one fold")
    expected = set(map(str, ids))
    if set(flat) != expected:
        raise ValueError(f"folds do not cover the ids: {len(expected - set(flat))} missing, "
                         f"{len(set(flat) - expected)} unknown")


def write_splits(path: str | os.PathLike, dataset: str, folds: Sequence[Sequence[str]], n_folds: int,
                 seed: int | None, method: str) -> None:
    """Write `data/splits/<dataset>.json` (format in docs/architecture.md), atomically."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if len(folds) != n_folds:
        raise ValueError(f"{len(folds)} folds given but n_folds = {n_folds}")
    write_json(path, {"dataset": dataset, "n_folds": n_folds, "seed": seed, "method": method,
                      "folds": [[str(i) for i in f] for f in folds]})
