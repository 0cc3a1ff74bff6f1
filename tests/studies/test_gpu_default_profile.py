"""studies/gpu/gpu_default_profile.py (the GPU check of the default profile) on a tiny model and the smoke profile's
sizes: `train` trains the evaluator, GPT-pre and ours, writes their test generations and the evaluator's parses;
`score` scores them as the evaluate stage does and writes the tables."""

from __future__ import annotations

import json
import sys

import pytest

from mwpgen.io import read_generations, read_jsonl
from studies.gpu import gpu_default_profile
from tests.helpers.tiny_project import tiny_arithmetic_project


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu")
    params, data, _ = tiny_arithmetic_project(root, "experiment: {max_test: 0}\n")
    return root, params, data


def test_train_then_score(setup, tmp_path, monkeypatch):
    root, params, data = setup
    out, models = tmp_path / "out", tmp_path / "models"
    monkeypatch.setattr(sys, "argv", ["bench", "train", "--params", str(params), "--data", str(data), "--out", str(out),
                                      "--models", str(models)])
    gpu_default_profile.main()
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["stages"]) == {"train_evaluator", "gpt_pre", "ours"}
    n_test = len(json.loads((data / "splits" / "arithmetic.json").read_text())["folds"][0])
    assert summary["n_test"] == n_test
    for model in ("gpt_pre", "ours"):
        rows = read_generations(out / f"generations_{model}.csv")
        parses = list(read_jsonl(out / f"parses_{model}.jsonl"))
        assert len(rows) == len(parses) == n_test and [r["id"] for r in rows] == [p["id"] for p in parses]
        assert summary["stages"][model]["steps"] > 0
    assert summary["stages"]["ours"]["phase_steps"] == [1, 1]  # the smoke profile's caps
    assert 0 <= summary["stages"]["train_evaluator"]["oracle_acc_eq"] <= 1

    monkeypatch.setattr(sys, "argv", ["bench", "score", str(out), "--params", str(params), "--data", str(data),
                                      "--evaluator", str(models / "evaluator")])
    gpu_default_profile.main()
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores["scores"]) == {"gpt_pre", "ours"}
    assert scores["ours_minus_gpt_pre"]["n"] == n_test
    for s in scores["scores"].values():
        # the same evaluator on both sides here, so the two ACC-eq columns must agree
        assert s["acc_eq"] == s["acc_eq_gpu_evaluator"]
    tables = (out / "tables.md").read_text()
    assert "| gpt_pre |" in tables and "| ours |" in tables and "ours − GPT-pre" in tables


def test_ours_alone_takes_the_gate_target_from_the_evaluators_metrics(setup, tmp_path, monkeypatch):
    """--evaluator-metrics: no evaluator is trained there; ours' co-trained mwp2eq learns up to the accuracy in that
    file (as flows/train_ours.py reads it); nothing is parsed there, and `score` scores with this machine's
    evaluator."""
    root, params, data = setup
    out, models = tmp_path / "out", tmp_path / "models"
    metrics = tmp_path / "evaluator.json"
    metrics.write_text(json.dumps({"best_val_parse_accuracy": 0.25}))
    monkeypatch.setattr(sys, "argv", ["bench", "train", "--params", str(params), "--data", str(data), "--out", str(out),
                                      "--models", str(models), "--generators", "ours", "--evaluator-metrics",
                                      str(metrics)])
    gpu_default_profile.main()
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["stages"]) == {"ours"}
    assert summary["mwp2eq_target"]["accuracy"] == 0.25
    assert summary["stages"]["ours"]["mwp2eq_gate"]["target"] == 0.25
    assert not (models / "evaluator").exists() and not list(out.glob("parses_*"))

    monkeypatch.setattr(sys, "argv", ["bench", "score", str(out), "--params", str(params), "--data", str(data),
                                      "--evaluator", str(root / "tiny-model")])
    gpu_default_profile.main()
    scores = json.loads((out / "scores.json").read_text())["scores"]
    assert set(scores) == {"ours"} and scores["ours"]["acc_eq_gpu_evaluator"] is None
    assert 0 <= scores["ours"]["acc_eq"] <= 1
    assert "Evaluator trained there" not in (out / "tables.md").read_text()
