"""MLflow runs that say what they are: names by profile and targets or by model, dataset and fold; tags with the git
commit, the profile and the DVC experiment; timings apart from quality metrics; one parent per plain `dvc repro`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mwpgen.paths import PROJECT_ROOT


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    for name in ("MWPGEN_PARENT_RUN_ID", "MWPGEN_PROFILE", "MWPGEN_REPRO_ID", "DVC_STAGE", "DVC_EXP_NAME",
                 "DVC_EXP_BASELINE_REV"):
        monkeypatch.delenv(name, raising=False)
    from tracking.provenance import run_tags
    from tracking.runs import client

    run_tags.cache_clear()
    yield client()
    run_tags.cache_clear()


def _runs(c) -> dict[str, object]:
    from tracking.runs import experiment_id

    return {r.info.run_name: r for r in c.search_runs([experiment_id(c)])}


def test_a_pipeline_run_is_named_by_profile_and_targets_and_tagged_with_the_commit(store, monkeypatch):
    monkeypatch.setenv("MWPGEN_PROFILE", "smoke")
    from tracking.runs import stage_run

    with stage_run("pipeline", tags={"dvc.targets": "train_ours@arithmetic-0"}):
        pass
    with pytest.raises(RuntimeError), stage_run("pipeline", tags={"dvc.targets": "all"}):
        raise RuntimeError("a stage failed")
    runs = _runs(store)
    one = runs["pipeline · smoke · train_ours@arithmetic-0"]
    assert runs["pipeline · smoke · all"].info.status == "FAILED" and one.info.status == "FINISHED"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True).stdout
    assert one.data.tags["mlflow.source.git.commit"] == head.strip()
    assert one.data.tags["mwpgen.git_dirty"] in ("true", "false")
    assert one.data.tags["mwpgen.profile"] == "smoke" and one.data.tags["mwpgen.stage"] == "pipeline"


def test_fold_runs_are_named_by_model_dataset_and_fold(store, monkeypatch):
    monkeypatch.setenv("DVC_EXP_NAME", "lr-sweep-3")
    from tracking.runs import fold_run, stage_run

    with stage_run("pipeline") as pipeline:
        monkeypatch.setenv("MWPGEN_PARENT_RUN_ID", pipeline.run_id)
        for model in ("gpt_pre", "ours"):
            with fold_run(model, "arithmetic", 1, "evaluate") as run:
                run.metrics({"bleu4": 0.2})
    runs = _runs(store)
    fold, group = runs["ours · arithmetic · fold 1"], runs["ours · arithmetic"]
    assert "gpt_pre · arithmetic · fold 1" in runs and "fold 1" not in runs
    assert fold.data.tags["mlflow.parentRunId"] == group.info.run_id
    assert group.data.tags["mlflow.parentRunId"] == pipeline.run_id
    assert {k: fold.data.tags[k] for k in ("mwpgen.model", "mwpgen.dataset", "mwpgen.fold", "mwpgen.dvc_experiment")} \
        == {"mwpgen.model": "ours", "mwpgen.dataset": "arithmetic", "mwpgen.fold": "1",
            "mwpgen.dvc_experiment": "lr-sweep-3"}


def test_timings_are_logged_under_time_and_quality_metrics_as_they_are(store):
    from tracking.runs import is_timing, metric_key, stage_run

    assert [metric_key(k) for k in ("bleu4", "wall_s", "stage_cpu_s.train:gpt_pre-arithmetic-0", "timing.parse",
                                    "phase1_min_per_epoch", "tokens_per_s", "steps", "n_train", "time/wall_s")] == \
        ["bleu4", "time/wall_s", "time/stage_cpu_s.train:gpt_pre-arithmetic-0", "time/parse",
         "time/phase1_min_per_epoch", "time/tokens_per_s", "steps", "n_train", "time/wall_s"]
    assert not any(is_timing(k) for k in ("acc_eq_equivalent", "best_val_loss", "final_train_loss", "best_step"))
    with stage_run("report") as run:
        run.metrics({"bleu4": 0.2, "wall_s": 12.0, "stage_wall_s.report": 3.0})
    assert set(store.get_run(run.run_id).data.metrics) == {"bleu4", "time/wall_s", "time/stage_wall_s.report"}


def test_profile_is_recognised_in_params(tmp_path, monkeypatch):
    from tracking.provenance import active_profile

    monkeypatch.delenv("MWPGEN_PROFILE", raising=False)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "smoke.yaml").write_text("experiment: {smoke: true, max_test: 4}\n")
    (profiles / "paper.yaml").write_text("experiment: {folds: [0, 1, 2, 3, 4]}\n")
    params = tmp_path / "params.yaml"
    params.write_text("experiment: {smoke: false, max_test: 0, folds: [0]}\n")
    assert active_profile(params, profiles) == "default"
    params.write_text("experiment: {smoke: true, max_test: 4, folds: [0]}\n")
    assert active_profile(params, profiles) == "smoke"
    params.write_text("experiment: {smoke: true, max_test: 4, folds: [0, 1, 2, 3, 4]}\n")
    assert active_profile(params, profiles) == "paper+smoke"
    monkeypatch.setenv("MWPGEN_PROFILE", "mine")
    assert active_profile(params, profiles) == "mine"


def test_files_a_repro_writes_do_not_make_the_code_dirty(tmp_path):
    from tracking.provenance import dirty_paths

    def git(*a):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tmp_path, check=True,
                              capture_output=True)

    (tmp_path / "metrics").mkdir()
    for name in ("dvc.lock", "metrics/report.json", "code.py"):
        (tmp_path / name).write_text("1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    (tmp_path / "dvc.lock").write_text("2\n")
    (tmp_path / "metrics/report.json").write_text("2\n")
    assert dirty_paths(tmp_path) == []
    (tmp_path / "code.py").write_text("2\n")
    assert dirty_paths(tmp_path) == ["code.py"]


# A stand-in for `dvc repro`: a process whose command line is `dvc`, running "stages" one after the other (two, or
# one per experiment as a queue worker), each a python process with DVC_STAGE set (as DVC sets it) that opens a stage
# run and prints its parent.
FAKE_DVC = """\
#!{python}
import os, subprocess, sys
stage = "from tracking.runs import stage_run, client\\n" \\
        "with stage_run(os.environ['DVC_STAGE']) as run:\\n" \\
        "    print(client().get_run(run.run_id).data.tags['mlflow.parentRunId'])"
for experiment in sys.argv[1:] or [None]:  # as a queue worker: one process, several experiments
    named = {{"DVC_EXP_NAME": experiment}} if experiment else {{}}
    for name in ("download", "split")[: 1 if experiment else 2]:
        subprocess.run([sys.executable, "-c", "import os\\n" + stage], check=True,
                       env={{**os.environ, "DVC_STAGE": name, **named}})
"""


def test_stages_of_one_plain_dvc_repro_share_one_parent_and_another_repro_gets_another(store, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dvc = bin_dir / "dvc"
    dvc.write_text(FAKE_DVC.format(python=sys.executable))
    dvc.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MWPGEN_PARENT_RUN_ID", "MWPGEN_REPRO_ID")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    first = subprocess.run([str(dvc)], env=env, capture_output=True, text=True, check=True,
                           cwd=PROJECT_ROOT).stdout.split()
    assert len(first) == 2 and len(set(first)) == 1  # the repro's two stages, one parent
    parent = store.get_run(first[0])
    assert parent.info.run_name.startswith("dvc repro · ") and parent.info.status == "FINISHED"
    assert parent.data.tags["mwpgen.stage"] == "pipeline" and parent.data.tags["mwpgen.repro"]
    # a queue worker runs one experiment after another in one process: each is a repro of its own, as is a later one
    queued = subprocess.run([str(dvc), "exp-a", "exp-b"], env=env, capture_output=True, text=True, check=True,
                            cwd=PROJECT_ROOT).stdout.split()
    assert len(set(queued)) == 2 and first[0] not in queued
    assert store.get_run(queued[1]).info.run_name.startswith("dvc exp run · ")
    assert store.get_run(queued[1]).info.run_name.endswith(" · exp-b")


def test_a_wrapper_names_the_repro_and_a_stage_run_by_hand_has_no_parent(store, monkeypatch):
    from tracking.runs import find_parent_run

    assert find_parent_run() is None  # no DVC_STAGE: run by hand
    monkeypatch.setenv("MWPGEN_REPRO_ID", "nightly-42")
    parent = find_parent_run()
    assert parent == find_parent_run() and store.get_run(parent).data.tags["mwpgen.key"] == "repro/nightly-42"
