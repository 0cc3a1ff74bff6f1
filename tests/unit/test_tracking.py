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


def test_new_experiment_is_marked_model_training(tmp_path, monkeypatch):
    # MLflow 3's experiment kind: "Machine learning" (not GenAI), so a UI that reads it opens the runs table.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    from tracking.runs import EXPERIMENT, EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, client, experiment_id, ui_url

    assert (EXPERIMENT_KIND_TAG, EXPERIMENT_KIND) == ("mlflow.experimentKind", "custom_model_development")
    c = client()
    assert ui_url("http://127.0.0.1:5000/", c) == "http://127.0.0.1:5000/#/experiments?workflowType=machine_learning"
    assert c.get_experiment_by_name(EXPERIMENT) is None  # ui_url creates nothing
    exp = experiment_id(c)
    assert c.get_experiment(exp).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    assert ui_url("http://127.0.0.1:5000", c) == \
        f"http://127.0.0.1:5000/#/experiments/{exp}/runs?workflowType=machine_learning"


def test_existing_experiment_gets_the_kind_but_a_chosen_one_stays(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    from tracking.runs import EXPERIMENT, EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, client, experiment_id

    c = client()
    old = c.create_experiment(EXPERIMENT)  # as made before the tag
    assert EXPERIMENT_KIND_TAG not in c.get_experiment(old).tags
    assert experiment_id(c) == old
    assert c.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    c.set_experiment_tag(old, EXPERIMENT_KIND_TAG, "genai_development")  # a kind chosen in the UI
    assert experiment_id(c) == old and c.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == "genai_development"


def test_the_kind_tag_and_workflow_are_the_installed_mlflow_uis():
    # Read from the installed UI bundle, not guessed: the tag its kind selector writes, and the URL parameter of
    # its sidebar's "GenAI | Model training" switch that ui_url sets.
    from pathlib import Path

    import mlflow

    from tracking.runs import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, UI_WORKFLOW

    build = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    main = next(build.glob("main.*.js"), None)
    if main is None:
        pytest.skip("this mlflow has no UI bundle")
    text = main.read_text(encoding="utf-8", errors="replace")
    assert f'"{EXPERIMENT_KIND_TAG}"' in text and f'CUSTOM_MODEL_DEVELOPMENT="{EXPERIMENT_KIND}"' in text
    assert f'MACHINE_LEARNING="{UI_WORKFLOW}"' in text and 'get("workflowType")' in text
