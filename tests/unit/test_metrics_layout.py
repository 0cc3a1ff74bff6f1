"""Metrics files that fit a terminal: timings in their own files (timing/, plain DVC outs), the training curve as
step-indexed `train_loss` / `val_loss` in MLflow for every trainer."""

from __future__ import annotations

import json

from flows.common import read_metrics, record_training, write_metrics
from mwpgen.paths import FoldPaths
from tracking.provenance import machine
from tracking.runs import curve_rows


def test_timings_go_to_their_own_file_and_come_back_together(tmp_path):
    metrics, timing = tmp_path / "metrics" / "m.json", tmp_path / "timing" / "m.json"
    written = {"bleu4": 0.2, "n": 298, "wall_s": 12.5, "phase1_step_s": 4.7, "phase1_min_per_epoch": 10.8,
               "timing": {"load_s": 1.0}, "timings_s": {"parse": 36.3}, "best_val_loss": 1.5}
    assert write_metrics(metrics, timing, written) == {"load_s": 1.0, "parse": 36.3, "wall_s": 12.5,
                                                       "phase1_step_s": 4.7, "phase1_min_per_epoch": 10.8}
    assert json.loads(metrics.read_text()) == {"bleu4": 0.2, "n": 298, "best_val_loss": 1.5}
    assert read_metrics(metrics, timing)["wall_s"] == 12.5
    assert json.loads(timing.read_text())["machine"] == machine()  # where it was computed, beside the timings
    write_metrics(metrics, timing, {"not_run": "no GloVe"})
    assert json.loads(timing.read_text()) == {"machine": machine()}  # written even empty: dvc.yaml declares it
    assert {"cpu", "kind", "commit", "code_dirty"} <= set(machine())


def test_fold_timing_paths_sit_under_timing(tmp_path):
    paths = FoldPaths(tmp_path, "ours", "arithmetic", 0)
    assert paths.train_timing == tmp_path / "timing/metrics/train/ours/arithmetic/fold0.json"
    assert paths.scores_timing == tmp_path / "timing/results/scores/ours/arithmetic/fold0.json"


def test_curve_rows_read_train_and_val_loss():
    assert curve_rows("step,train_loss,val_loss\n0,,3.0\n1,2.0,\n") == [
        {"step": 0.0, "train_loss": None, "val_loss": 3.0}, {"step": 1.0, "train_loss": 2.0, "val_loss": None}]
    assert curve_rows("step,loss\n1,2.0\n") == [{"step": 1.0, "train_loss": 2.0}]  # the older header


def test_record_training_logs_the_curve_by_step_and_timings_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("MWPGEN_PARENT_RUN_ID", raising=False)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    from tracking.runs import client, fold_run

    paths = FoldPaths(tmp_path, "gpt_pre", "arithmetic", 0)
    with fold_run("gpt_pre", "arithmetic", 0, "train") as run:
        run.metrics({"train_loss": 9.0}, step=2)  # logged live during training: kept as it is
        record_training(run, paths, {"steps": 3, "best_val_loss": 1.5, "timing": {"wall_s": 60.0}},
                        "step,train_loss,val_loss\n0,,3.0\n1,2.0,\n2,1.0,1.5\n3,0.5,\n")
    c = client()
    history = {name: sorted((m.step, m.value) for m in c.get_metric_history(run.run_id, name))
               for name in ("train_loss", "val_loss")}
    assert history == {"train_loss": [(1, 2.0), (2, 9.0), (3, 0.5)], "val_loss": [(0, 3.0), (2, 1.5)]}
    logged = c.get_run(run.run_id).data.metrics
    assert logged["time/wall_s"] == 60.0 and logged["best_val_loss"] == 1.5 and "wall_s" not in logged
    assert json.loads(paths.train_timing.read_text()) == {"wall_s": 60.0, "machine": machine()}
    assert "timing" not in json.loads(paths.train_metrics.read_text())
