"""Cross-validation folds: partition, determinism, duplicates kept together, balance, published folds."""

from __future__ import annotations

import json
import random

import pytest

from mwpgen.data.splits import (
    check_partition,
    duplicate_groups,
    fold_train_test,
    given_folds,
    normalise_text,
    seeded_folds,
    write_splits,
)


def make_records(n: int, dup_every: int = 0) -> list[dict]:
    """n records with distinct texts; with dup_every, every dup_every-th record copies the one before it."""
    recs = []
    for i in range(1, n + 1):
        text = f"Joan has num1 apples and buys num2 more ({i}) ."
        if dup_every and i % dup_every == 0:
            text = recs[-1]["text"].upper().replace(" ", "  ")  # same after normalisation
        recs.append({"id": str(i), "text": text})
    return recs


def fold_of(folds: list[list[str]]) -> dict[str, int]:
    return {rid: k for k, f in enumerate(folds) for rid in f}


def test_partition_disjoint_and_complete():
    recs = make_records(103, dup_every=7)
    folds = seeded_folds(recs, 5, seed=42)
    assert len(folds) == 5
    check_partition(folds, [r["id"] for r in recs])
    assert sum(map(len, folds)) == 103


def test_deterministic_and_independent_of_input_order():
    recs = make_records(200, dup_every=9)
    shuffled = recs[:]
    random.Random(1).shuffle(shuffled)
    assert seeded_folds(recs, 5, 42) == seeded_folds(recs, 5, 42) == seeded_folds(shuffled, 5, 42)


def test_different_seed_gives_different_folds():
    recs = make_records(200)
    assert seeded_folds(recs, 5, 42) != seeded_folds(recs, 5, 43)


def test_duplicates_land_in_the_same_fold():
    recs = make_records(60, dup_every=3)
    recs.append({"id": "61", "text": "  " + recs[0]["text"].lower() + "\n"})  # a third copy of record 1
    where = fold_of(seeded_folds(recs, 5, 7))
    for group in duplicate_groups(recs):
        assert len({where[i] for i in group}) == 1
    assert ["1", "61"] in [g for g in duplicate_groups(recs) if "1" in g]


def test_balanced_sizes():
    sizes = [len(f) for f in seeded_folds(make_records(1492), 5, 42)]
    assert max(sizes) - min(sizes) <= 1
    recs = make_records(500, dup_every=4)
    sizes = [len(f) for f in seeded_folds(recs, 5, 42)]
    assert max(sizes) - min(sizes) <= max(map(len, duplicate_groups(recs)))


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="duplicate record id"):
        seeded_folds([{"id": "1", "text": "a"}, {"id": "1", "text": "b"}, {"id": "2", "text": "c"}], 2, 0)
    with pytest.raises(ValueError, match="cannot fill"):
        seeded_folds(make_records(3), 5, 0)
    with pytest.raises(ValueError):
        seeded_folds(make_records(10), 1, 0)


def test_property_random_inputs():
    for trial in range(200):
        rng = random.Random(trial)
        n_folds = rng.randint(2, 7)
        pool = [f"text {j}" for j in range(rng.randint(n_folds, 40))]
        recs = [{"id": str(i), "text": rng.choice(pool)} for i in rng.sample(range(10_000), rng.randint(len(pool), 90))]
        if len({normalise_text(r["text"]) for r in recs}) < n_folds:
            continue
        seed = rng.randint(0, 10**6)
        folds = seeded_folds(recs, n_folds, seed)
        check_partition(folds, [r["id"] for r in recs])
        where = fold_of(folds)
        groups = duplicate_groups(recs)
        assert all(len({where[i] for i in g}) == 1 for g in groups)
        sizes = [len(f) for f in folds]
        assert max(sizes) - min(sizes) <= max(map(len, groups))
        assert min(sizes) > 0
        assert seeded_folds(rng.sample(recs, len(recs)), n_folds, seed) == folds


def test_given_folds_restricts_to_present_ids_and_reports_leaks():
    recs = [{"id": "1", "text": "a b"}, {"id": "2", "text": "A  b"}, {"id": "3", "text": "c"},
            {"id": "5", "text": "d"}]
    published = [[1, 3], [2, 4], [5]]  # 4 was quarantined; 1 and 2 are duplicates in different folds
    folds, report = given_folds(recs, published)
    assert folds == [["1", "3"], ["2"], ["5"]]
    assert (report.n_given, report.n_kept, report.dropped_ids) == (5, 4, ["4"])
    assert report.leak_groups == [{"ids": ["1", "2"], "folds": [0, 1]}]
    assert (report.n_leak_groups, report.n_leak_ids) == (1, 2)
    with pytest.raises(ValueError, match="in no published fold"):
        given_folds(recs + [{"id": "9", "text": "e"}], published)
    with pytest.raises(ValueError, match="is in folds 0 and 1"):
        given_folds(recs, [[1, 2], [2, 3, 5]])


def test_fold_train_test():
    recs = make_records(20)
    folds = seeded_folds(recs, 5, 0)
    for k in range(5):
        train, test = fold_train_test(recs, folds, k)
        assert sorted(r["id"] for r in test) == sorted(folds[k])
        assert len(train) + len(test) == 20 and not {r["id"] for r in train} & set(folds[k])
    with pytest.raises(IndexError):
        fold_train_test(recs, folds, 5)


def test_write_splits(tmp_path):
    path = tmp_path / "splits" / "mawps.json"
    folds = seeded_folds(make_records(10), 2, 42)
    write_splits(path, "mawps", folds, 2, 42, "seeded")
    assert json.loads(path.read_text()) == {"dataset": "mawps", "n_folds": 2, "seed": 42, "method": "seeded",
                                            "folds": folds}
    with pytest.raises(ValueError):
        write_splits(path, "mawps", folds, 5, 42, "seeded")
    with pytest.raises(ValueError):
        write_splits(path, "mawps", folds, 2, 42, "random")


def test_fold_train_test_drops_training_copies_of_test_texts():
    # Published folds can split a duplicate group; the test copy must not also be trained on.
    recs = [{"id": "1", "text": "A has num1 apples ."}, {"id": "2", "text": "a has  num1 apples ."},
            {"id": "3", "text": "B has num1 pears ."}]
    train, test = fold_train_test(recs, [["1"], ["2", "3"]], 0)
    assert [r["id"] for r in test] == ["1"] and [r["id"] for r in train] == ["3"]
