"""One (dataset, fold) of the experiment: its training and test records, subsampled reproducibly.

Every model stage (keywords, train, generate, evaluate) calls `load_fold` with the same arguments, so they all
see the same records without passing copies of them around.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from mwpgen.io import read_json, read_jsonl
from mwpgen.data.splits import fold_train_test, id_sort_key


@dataclass(frozen=True)
class Fold:
    dataset: str
    fold: int
    train: list[dict]  # training fold (no text shared with the test fold), maybe subsampled
    test: list[dict]  # test fold, maybe subsampled
    n_train_full: int
    n_test_full: int


def subsample(records: list[dict], n: int, seed: str) -> list[dict]:
    """`n` records drawn with a string seed (0 or n >= len: all of them), kept in id order."""
    if not n or n >= len(records):
        return list(records)
    chosen = random.Random(seed).sample(records, n)
    return sorted(chosen, key=lambda r: id_sort_key(r["id"]))


def load_fold(data_dir: str | Path, dataset: str, fold: int, max_train: int = 0, max_test: int = 0,
              seed: int = 0) -> Fold:
    data_dir = Path(data_dir)
    records = read_jsonl(data_dir / "processed" / f"{dataset}.jsonl")
    folds = read_json(data_dir / "splits" / f"{dataset}.json")["folds"]
    if not 0 <= fold < len(folds):
        raise ValueError(f"{dataset}: fold {fold} does not exist; data/splits/{dataset}.json has {len(folds)} folds")
    train, test = fold_train_test(records, folds, fold)
    return Fold(dataset, fold,
                subsample(train, max_train, f"{seed}:{dataset}:{fold}:train"),
                subsample(test, max_test, f"{seed}:{dataset}:{fold}:test"),
                len(train), len(test))
