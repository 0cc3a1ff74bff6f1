"""benchmarks/bench_ours_epoch.py (the GPU time-per-epoch check) on a tiny model: it trains both phases, reports
per-phase timings and writes a generations table in the format studies/gpu/score_generations.py expects."""

from __future__ import annotations

import csv
import json
import sys

import pytest

from benchmarks import bench_ours_epoch
from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from tests.helpers.tiny_model import tiny_model_dir


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    names, objects = ["Joan", "Sam", "Mike", "Sara"], ["apples", "pencils", "marbles"]
    records = [{"id": str(i + 1), "dataset": "arithmetic", "equation": "x = num1 + num2",
                "text": f"{names[i % 4]} has num1 {objects[i % 3]} . {names[(i + 1) % 4]} gives num2 more . "
                        f"How many {objects[i % 3]} now ?"} for i in range(30)]
    write_jsonl(root / "data" / "processed" / "arithmetic.jsonl", records)
    write_json(root / "data" / "splits" / "arithmetic.json",
               {"dataset": "arithmetic", "folds": seeded_folds(records, 5, 1)})
    corpus = [r["text"] + " " + r["equation"] for r in records] + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE]
    return root, tiny_model_dir(root / "tiny-model", corpus)


def test_both_phases_are_timed_and_the_test_fold_generated(tiny_data, tmp_path, monkeypatch):
    root, model = tiny_data
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["bench", "--data", str(root / "data"), "--model", str(model), "--max-steps", "3",
                                      "--device", "cpu", "--selector", "residual", "--selector-lr", "1e-2",
                                      "--out", str(out)])
    bench_ours_epoch.main()
    summary = json.loads((out / "summary.json").read_text())
    for phase in ("phase1", "phase2"):
        assert summary[phase]["steps"] == 3 and summary[phase]["min_per_epoch"] > 0
    assert "kl" in summary["phase1"] and "eq" in summary["phase2"]
    assert len(json.loads((out / "history.json").read_text())) == 6
    with open(out / "generations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["fold", "id", "equation", "context", "reference", "generated"]
    assert len(rows) == len(json.loads((root / "data" / "splits" / "arithmetic.json").read_text())["folds"][0])
    # the selection statistics count the contexts actually written
    assert summary["test_selection"]["problems_with_none"] == sum(not r["context"].split() for r in rows)
