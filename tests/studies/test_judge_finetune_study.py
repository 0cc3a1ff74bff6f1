"""studies/judge_finetune: the synthetic readings keep to the training fold and are wrong where they should be, and
every step of the comparison runs end to end on a tiny model (its figures mean nothing)."""

from __future__ import annotations

import argparse
import json
import random

import pytest

from mwpgen.evaluation.metrics import equation_symbols
from mwpgen.judge.model import PROMPT
from studies.judge_finetune import compare
from studies.judge_finetune.figures import platt, shape
from studies.judge_finetune.synthetic import perturb, swap_order, synthetic_readings
from tests.helpers.tiny_model import tiny_model_dir

EQUATIONS = ["x = num1 + num2", "x = num1 - num2", "x = num1 * num2", "x = num1 / num2",
             "x = ( num1 + num2 ) * num3", "x = num1 - num2 - num3"]


def test_a_perturbed_equation_is_another_equation_and_order_swaps_only_minus_and_divide():
    rng = random.Random(0)
    for equation in EQUATIONS * 5:
        edited, kind = perturb(equation, "A has num1 , num2 and num3 . How many ?", rng)
        assert equation_symbols(edited) != equation_symbols(equation), kind
    assert swap_order("x = num1 + num2".split(), rng) is None
    assert swap_order("x = num1 / num2".split(), rng) == "x = num2 / num1".split()


def test_synthetic_readings_come_from_the_training_fold_only(tmp_path):
    records = [{"id": str(i), "dataset": "arithmetic", "text": f"Tom has num1 apples {i} and num2 more . How many ?",
                "equation": EQUATIONS[i % 4], "numbers": ["1", "2"]} for i in range(20)]
    (tmp_path / "processed").mkdir()
    (tmp_path / "splits").mkdir()
    (tmp_path / "processed" / "arithmetic.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    folds = [[str(i) for i in range(k, 20, 5)] for k in range(5)]
    (tmp_path / "splits" / "arithmetic.json").write_text(json.dumps({"dataset": "arithmetic", "n_folds": 5,
                                                                     "seed": 1, "method": "seeded", "folds": folds}))
    from mwpgen.data.folds import load_fold

    fold = load_fold(tmp_path, "arithmetic", 0, seed=7, validation_size=3)
    rows = synthetic_readings(tmp_path, "arithmetic", 0, 7, 3)
    allowed = {r["id"] for r in fold.train}
    assert {r["group"] for r in rows} == allowed
    assert not allowed & ({r["id"] for r in fold.validation} | set(folds[0]))
    assert sum(r["label"] for r in rows) == len(allowed) == len(rows) - sum(1 - r["label"] for r in rows)


def test_shapes_and_platt_keep_the_ranking():
    assert [shape(e) for e in EQUATIONS] == ["+", "-", "*", "/", "two or more", "two or more"]
    scores, labels = [0.1, 0.4, 0.35, 0.8, 0.9, 0.2], [0, 1, 0, 1, 1, 0]
    calibrated = platt(scores, labels)
    assert sorted(range(6), key=scores.__getitem__) == sorted(range(6), key=calibrated.__getitem__)


def test_every_step_runs_on_a_tiny_model(tmp_path):
    train, validation = compare.parts(40)
    assert {r["label"] for r in train} == {r["label"] for r in validation} == {0, 1}
    texts = [r["problem"] + " " + r["equation"] for r in train + validation] + [PROMPT]
    model = tiny_model_dir(tmp_path / "lm", texts, layers=2)
    cache = tmp_path / "cache"
    common = ["--backbone", str(model), "--cache", str(cache), "--limit", "40", "--threads", "1"]
    compare.main(["rule", "--cache", str(cache), "--limit", "40"])  # the committed evaluator's recorded parses
    stored = json.loads((cache / "scores" / "rule.json").read_text())["scores"]
    compare.main(["rule", "--evaluator", str(model), *common])  # a parser of its own
    compare.main(["probe", *common, "--layers", "1", "2"])
    for seed in (0, 1):
        compare.main(["finetune", *common, "--layers", "2", "--seed", str(seed), "--warm-start", "8"])
    compare.main(["cost", *common, "--layers", "1", "2", "--cost-rows", "8", "--repeats", "2"])
    compare.main(["table", "--cache", str(cache), "--limit", "40", "--out", str(tmp_path / "results")])
    result = json.loads((tmp_path / "results.json").read_text())
    names = set(result["rows"])
    assert len(stored) == 40 and set(stored) <= {0.0, 1.0}
    assert {"probe_L1_nall", "probe_L2_nall", "probe_L2_nall + rule gate", "finetune_L2_nall_e1_lr5e-05_ensemble2",
            "finetune_L2_nall_e1_lr5e-05_ensemble2 + rule gate"} <= names
    assert all(0 <= f["auc"] <= 1 for f in result["rows"].values() if f["auc"] is not None)
    assert result["rows"]["probe_L2_nall + rule gate"]["ms_per_candidate"] > 0
    assert "| candidate |" in (tmp_path / "results.md").read_text()
    with pytest.raises(ValueError):  # scores of other readings are not silently compared
        compare.table(argparse.Namespace(cache=cache, limit=30))


def test_a_corpus_the_judge_is_not_fitted_on_adds_only_its_new_training_texts():
    """--with-corpus corpus_round4: its read training problems, none already held (a text read in two sets counts
    once), none of another part."""
    from mwpgen.judge.readings import CHOOSING_SETS, readings

    held = readings(compare.ROOT, CHOOSING_SETS)
    train, validation = held["train"], held["validation"]
    added = compare.corpus_readings("corpus_round4", train + validation)
    texts = {(r["equation"], r["problem"]) for r in added}
    assert added and len(texts) == len(added) and {r["part"] for r in added} == {"train"}
    assert not texts & {(r["equation"], r["problem"]) for r in train + validation}
    assert {r["source"] for r in added} == {"data/labels/corpus_round4"}
    args = argparse.Namespace(with_corpus=["corpus_round4"], max_train=0, synthetic=0, step="probe")
    params = argparse.Namespace(experiment=argparse.Namespace(seed=0))
    assert len(compare.training_rows(args, params, train, validation)) == len(train) + len(added)
    assert compare.name_of(args, 12) == "probe_L12_nall+corpus_round4"
