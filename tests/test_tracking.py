"""MLflow logging by explicit run id: a rerun with changed params keeps the new value instead of failing."""

from __future__ import annotations

import pytest


def test_changed_param_on_a_reused_run_becomes_a_tag(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    from tracking.runs import StageRun, client, experiment_id

    c = client()
    run_id = c.create_run(experiment_id(c), run_name="fold 0").info.run_id
    run = StageRun(c, run_id)
    run.params({"train.steps": 600, "seed": 1})
    with pytest.warns(UserWarning, match="train.steps"):
        run.params({"train.steps": 250, "seed": 1})  # same seed: fine; changed steps: a tag
    data = c.get_run(run_id).data
    assert data.params == {"train.steps": "600", "seed": "1"}
    assert data.tags["param_changed.train.steps"] == "250"
