"""One vocabulary for what every trainer reports (the causal LM's, seq2seq's, ours', tuning's), so runs of different
trainers compare name by name (MLflow's Compare, `dvc metrics diff`, `dvc plots diff`).

A training stage's metrics file (FoldPaths.train_metrics) is

    {"steps", "best_step", "best_val_loss", "final_train_loss", "stopped_early", "resumed_from",
     <the trainer's own measurements, by names of their own>,
     "timing": {"wall_s", "step_s", <the trainer's own timings>}}

(`SHARED`: null where a trainer has no such thing, e.g. no validation slice). Timings sit apart under "timing": they
change from run to run and machine to machine, the measurements do not. Its curve (FoldPaths.train_curve) is
`step,train_loss,val_loss` and the trainer's own columns after them. Its MLflow points are `log_metrics`'s names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mwpgen.log_window import TIMING

SHARED = ("steps", "best_step", "best_val_loss", "final_train_loss", "stopped_early", "resumed_from")
CURVE_COLUMNS = ("step", "train_loss", "val_loss")


def training_metrics(result: Mapping, extra: Mapping | None = None, timing: Mapping | None = None) -> dict:
    """A trainer's result (mwpgen/trainer.py's summary, and what the trainer adds) as a metrics file: the shared
    names, then `extra` (the trainer's own), then "timing" (wall_s, step_s and `timing`)."""
    seconds = result["timing"]
    step_s = seconds["step_s"]
    return {**{k: result[k] for k in SHARED}, **(extra or {}),
            "timing": {"wall_s": round(seconds["wall_s"], 1), "step_s": None if step_s is None else round(step_s, 4),
                       **(timing or {})}}


def curve_csv(history: Sequence[Mapping], validations: Sequence[Mapping], columns: Sequence[str] = ()) -> str:
    """`step,train_loss,val_loss` and `columns` (the trainer's own, from each step's history record): a row per step
    run and per step measured before any (a run's starting point, step 0), a cell empty where there is no value (a
    step without validation; several at one step: the last)."""
    rows: dict[int, dict] = {h["step"]: dict(h) for h in history}
    for v in validations:
        rows.setdefault(v["step"], {"step": v["step"]})["val_loss"] = v["val_loss"]
    names = [*CURVE_COLUMNS, *columns]
    def cell(x):
        return "" if x is None else f"{x:.6f}" if isinstance(x, float) else str(x)
    lines = [",".join(names)] + [",".join(cell(rows[s].get(k)) for k in names) for s in sorted(rows)]
    return "\n".join(lines) + "\n"


def log_metrics(record: Mapping) -> dict[str, float]:
    """A log record (mwpgen/log_window.py) as MLflow points: the shared and timing names as they are, a trainer's
    own loss terms as `train_<name>` (ours' "eq" -> "train_eq"); step, epoch and phase are the point's coordinates."""
    return {k if k.startswith("train_") or k in TIMING or k == "lr" else f"train_{k}": v for k, v in record.items()
            if k not in ("step", "epoch", "phase") and isinstance(v, (int, float))}
