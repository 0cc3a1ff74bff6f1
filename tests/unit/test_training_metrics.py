"""mwpgen/training_metrics.py: every trainer's metrics file, curve and MLflow points by the same names."""

from __future__ import annotations

from mwpgen.training_metrics import SHARED, curve_csv, log_metrics, training_metrics

RESULT = {"steps": 3, "best_step": 2, "best_val_loss": 1.25, "final_train_loss": 0.5, "stopped_early": False,
          "resumed_from": 0, "timing": {"wall_s": 12.345, "step_s": 4.11111}, "history": []}


def test_metrics_put_the_shared_names_first_and_the_timings_apart():
    metrics = training_metrics(RESULT, {"n_train": 7}, {"tokens_per_s": 9.5})
    assert list(metrics) == [*SHARED, "n_train", "timing"]
    assert metrics["timing"] == {"wall_s": 12.3, "step_s": 4.1111, "tokens_per_s": 9.5}
    assert "wall_s" not in metrics and "step_s" not in metrics


def test_curve_has_the_shared_columns_then_the_trainers_own():
    history = [{"step": 1, "train_loss": 2.0, "phase": 1}, {"step": 2, "train_loss": 1.0, "phase": 1},
               {"step": 3, "train_loss": 0.5, "phase": 2}]
    validations = [{"step": 0, "val_loss": 3.0}, {"step": 2, "val_loss": 1.6}, {"step": 2, "val_loss": 1.5}]
    assert curve_csv(history, validations, ("phase",)).splitlines() == [
        "step,train_loss,val_loss,phase", "0,,3.000000,", "1,2.000000,,1", "2,1.000000,1.500000,1", "3,0.500000,,2"]
    assert curve_csv([], []) == "step,train_loss,val_loss\n"


def test_log_points_keep_shared_names_and_prefix_a_trainers_own_terms():
    record = {"step": 4, "phase": 2, "epoch": 1, "train_loss": 2.0, "eq": 0.5, "lr": 1e-3, "step_s": 0.2,
              "tokens_per_s": 100.0}
    assert log_metrics(record) == {"train_loss": 2.0, "train_eq": 0.5, "lr": 1e-3, "step_s": 0.2,
                                   "tokens_per_s": 100.0}
