"""One (dataset, fold) of the experiment: its training and test records, subsampled reproducibly.

Every model stage (keywords, train, generate, evaluate) calls `load_fold` with the same arguments, so they all
see the same records without passing copies of them around.

With `validation_size` > 0 a validation slice is carved out of the training fold first: seeded by (seed, dataset,
fold) only, so every model of a fold gets the same one whatever its `max_train`; never from the test fold; and
removed, with every training problem of the same (normalised) text, before the training subsample is drawn, so
no training set contains a validation problem.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from mwpgen.data.splits import fold_train_test, id_sort_key, normalise_text
from mwpgen.io import read_json, read_jsonl


@dataclass(frozen=True)
class Fold:
    dataset: str
    fold: int
    train: list[dict]  # training fold (no text shared with the test fold or the validation slice), maybe subsampled
    test: list[dict]  # test fold, maybe subsampled
    n_train_full: int  # the training fold without the validation slice, before subsampling
    n_test_full: int
    validation: list[dict] = field(default_factory=list)  # carved from the training fold (validation_size), id order


def subsample(records: list[dict], n: int, seed: str) -> list[dict]:
    """`n` records drawn with a string seed (0 or n >= len: all of them), kept in id order."""
    if not n or n >= len(records):
        return list(records)
    chosen = random.Random(seed).sample(records, n)
    return sorted(chosen, key=lambda r: id_sort_key(r["id"]))


def validation_slice(train: list[dict], n: int, seed: str) -> tuple[list[dict], list[dict]]:
    """(validation, rest): `n` training records of distinct texts drawn with a string seed (id order), and the
    training records whose normalised text is none of theirs. n = 0: ([], train)."""
    if not n:
        return [], list(train)
    if n >= len(train):
        raise ValueError(
            f"validation_size = {n} leaves nothing to train on: the training fold has {len(train)} problems"
        )
    order = list(train)
    random.Random(seed).shuffle(order)
    chosen, texts = [], set()
    for r in order:
        key = normalise_text(r["text"])
        if key not in texts:
            chosen.append(r)
            texts.add(key)
            if len(chosen) == n:
                break
    rest = [r for r in train if normalise_text(r["text"]) not in texts]
    if not rest:
        raise ValueError(f"validation_size = {n} leaves nothing to train on")
    return sorted(chosen, key=lambda r: id_sort_key(r["id"])), rest


def test_ids(data_dir: str | Path, dataset: str, fold: int) -> list[str]:
    """Every test problem id of (dataset, fold), before any subsample (data/splits)."""
    folds = read_json(Path(data_dir) / "splits" / f"{dataset}.json")["folds"]
    if not 0 <= fold < len(folds):
        raise ValueError(f"{dataset}: fold {fold} does not exist; data/splits/{dataset}.json has {len(folds)} folds")
    return [str(i) for i in folds[fold]]


def load_fold(data_dir: str | Path, dataset: str, fold: int, max_train: int = 0, max_test: int = 0,
              seed: int = 0, validation_size: int = 0) -> Fold:
    data_dir = Path(data_dir)
    records = read_jsonl(data_dir / "processed" / f"{dataset}.jsonl")
    folds = read_json(data_dir / "splits" / f"{dataset}.json")["folds"]
    if not 0 <= fold < len(folds):
        raise ValueError(f"{dataset}: fold {fold} does not exist; data/splits/{dataset}.json has {len(folds)} folds")
    train, test = fold_train_test(records, folds, fold)
    validation, train = validation_slice(train, validation_size, f"{seed}:{dataset}:{fold}:validation")
    return Fold(dataset, fold,
                subsample(train, max_train, f"{seed}:{dataset}:{fold}:train"),
                subsample(test, max_test, f"{seed}:{dataset}:{fold}:test"),
                len(train), len(test), validation)
