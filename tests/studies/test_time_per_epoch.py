"""studies/full_size/time_per_epoch.py (issue 26's full-size estimate) on a tiny model and the scratch Arithmetic fold:
every model's steps are timed on the whole training fold and extrapolated to an epoch and to params.yaml's epoch
caps."""

from __future__ import annotations

import json
import math
import sys

from mwpgen.config.schema import load_params
from studies.full_size import time_per_epoch
from tests.helpers.tiny_project import tiny_arithmetic_project


def test_every_model_is_timed_and_extrapolated(tmp_path, monkeypatch):
    params_path, data, folds = tiny_arithmetic_project(tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["bench", "--params", str(params_path), "--data", str(data), "--dataset",
                                      "arithmetic", "--steps", "2", "--warmup", "1", "--generate", "3",
                                      "--out", str(out)])
    time_per_epoch.main()
    summary = json.loads((out / "summary.json").read_text())
    params = load_params(params_path)
    n_train = 60 - len(folds[0]) - params.experiment.validation_size
    assert summary["n_train"] == n_train and summary["n_test"] == len(folds[0])
    rows = summary["models"]
    assert set(rows) == {"evaluator", "gpt", "gpt_pre", "ours"}
    for name, cfg in (("evaluator", params.train.evaluator), ("gpt", params.train.generator)):
        row = rows[name]
        assert row["steps_timed"] == 2  # the warm-up step is run, not timed
        assert row["steps_per_epoch"] == math.ceil(n_train / (cfg.batch_size * cfg.grad_accum))
        assert row["schedule_epochs"] == cfg.epochs
        assert math.isclose(row["schedule_min"], row["step_s_mean"] * row["steps_per_epoch"] * cfg.epochs / 60,
                            abs_tol=0.051)
    assert rows["evaluator"]["parse_s_per_problem"] > 0 and rows["gpt_pre"]["generate_s_per_problem"] > 0
    ours = rows["ours"]
    assert ours["phase1"]["steps_timed"] == ours["phase2"]["steps_timed"] == 2
    assert ours["phase1"]["schedule_epochs"] == params.train.ours.phase1.epochs
