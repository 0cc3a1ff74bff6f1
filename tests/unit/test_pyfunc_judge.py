"""The served model and the learned judge (tracking/pyfunc_model.py): logged with the fold's judge as its artifact
`judge`, the loaded pyfunc model verifies with it and answers each problem's probability; logged without one it keeps
the rule. In a scratch MLflow store, without a server (tests/pipeline/test_pyfunc_serve.py serves one)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.tiny_bundle import check_verdicts, make_tiny_bundle, make_tiny_judge

REQUEST = {"equation": "x = 12 - 5", "context": "Joan", "n": 2, "verify": 3, "max_new_tokens": 8}


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """A tiny ours and a tiny judge, logged and registered by log_ours_model in a scratch store."""
    import mlflow

    from tracking.pyfunc_model import log_ours_model
    from tracking.runs import client, experiment_id

    home = tmp_path_factory.mktemp("mlflow")
    before = os.environ.get("MLFLOW_TRACKING_URI")
    uris = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlflow.db'}"
    try:
        bundle = make_tiny_bundle(home / "ours")
        judge = make_tiny_judge(home / "ours-base", home / "judge")
        c = client()
        run = c.create_run(experiment_id(c), run_name="fold 0", tags={"mwpgen.key": "ours/arithmetic/fold0"})
        c.set_terminated(run.info.run_id)
        info = log_ours_model(bundle, run.info.run_id, "arithmetic", 0, judge_dir=judge)
        # the same ours logged as a fold where train_judge adopted no judge (register passes judge_dir=None)
        without = log_ours_model(bundle, run.info.run_id, "arithmetic", 1, judge_dir=None)
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
        mlflow.set_registry_uri(os.environ["MLFLOW_TRACKING_URI"])
        yield {"info": info, "without": without, "bundle": bundle, "judge": judge}
    finally:
        mlflow.set_tracking_uri(uris[0])
        mlflow.set_registry_uri(uris[1])
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


def test_the_served_model_packages_the_judge_and_verifies_with_it(logged):
    import mlflow

    from mwpgen.generate import model_resolution
    from mwpgen.generate.service import packaged_judge
    from tracking.runs import client

    info = logged["info"]
    assert info["judge"] == "learned" and client().get_model_version("mwpgen-ours", "1").tags["judge"] == str(
        logged["judge"])
    folder = mlflow.artifacts.download_artifacts(info["model_uri"])
    packaged = packaged_judge(folder)
    assert packaged is not None and (packaged / "judge.json").exists()
    # `mwpgen generate --model models:/...` uses it by default
    assert model_resolution.resolve_judge(None, info["model_uri"], Path(folder)) == packaged
    model = mlflow.pyfunc.load_model(info["model_uri"])
    assert model.unwrap_python_model().service.judge.info.threshold == 0.5
    out = model.predict(pd.DataFrame([REQUEST]))
    assert len(out) == 2 and out["judge_probability"].between(0, 1).all()
    check_verdicts(logged["judge"], out.to_dict("records"))  # verdicts on the unrounded p
    assert list(out["judge_probability"]) == sorted(out["judge_probability"], reverse=True)


def test_a_model_logged_without_a_judge_keeps_the_rule(logged):
    import mlflow

    from mwpgen.generate import model_resolution
    from mwpgen.generate.service import packaged_judge
    from tracking.runs import client

    info = logged["without"]
    assert info["judge"] == "rule" and client().get_model_version("mwpgen-ours", str(info["version"])).tags[
        "judge"] == "rule"
    folder = mlflow.artifacts.download_artifacts(info["model_uri"])
    assert packaged_judge(folder) is None and not (Path(folder) / "artifacts" / "judge").exists()
    # not the checkout's judge either
    assert model_resolution.resolve_judge(None, info["model_uri"], Path(folder)) is None
    model = mlflow.pyfunc.load_model(info["model_uri"])
    assert model.unwrap_python_model().service.judge is None
    out = model.predict(pd.DataFrame([REQUEST]))
    assert out["judge_probability"].isna().all() and out["parsed_equation"].map(lambda x: isinstance(x, str)).all()


def test_the_served_model_says_when_no_problem_is_verified(logged):
    import mlflow

    model = mlflow.pyfunc.load_model(logged["info"]["model_uri"])
    judge = model.unwrap_python_model().service.judge
    judge.info.verified = {"precision_target": 0.9, "min_accepted": 10, "thresholds": {"-": None},
                           "validation": {"-": {"n": 12, "right": 2, "accepted": 0, "tp": 0, "precision": None}}}
    out = model.predict(pd.DataFrame([REQUEST])).to_dict("records")
    assert [p["verified"] for p in out] == [False, False] and all(p["judge_threshold"] is None for p in out)
    assert out[0]["verified_note"].startswith("equations of shape - are never verified: 2 of 12 validation readings")
