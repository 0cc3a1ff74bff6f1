"""The one training loop. Every trainer (the causal LM's, seq2seq's, ours' two phases, tuning's) supplies its step
and its validation; this owns what they share, in one order, so a fix to resumption or early stopping is made once:

    restore the resumable state (when the Trainer is built: before any step)
    for each span of steps (a whole run, or one of ours' phases):
        at its start, when the run starts there: a validation (`ValidationSchedule.at_start`), then `on_fresh_start`
        each step:  the trainer's step -> its record in `history` -> the log window closes at a log point
                    -> a validation when the schedule says -> early stopping's verdict
                    -> at the span's end (or where it stops): the best weights back, and, when another span follows,
                       the state saved there; otherwise the state every `save_every` steps -> on_step(step)

A state (mwpgen/resume.py) holds each of the trainer's `resumable` objects' state_dict, the span's early stopping,
the history, the validations, the log window and the RNG states; a killed run resumes from the last one and ends
bit-for-bit where an uninterrupted run ends (same device). It is never written at a run's last step: the finished
model supersedes it.

The names of what every trainer shares: a step's "train_loss" (its training loss), a validation's "val_loss" (and
"val_score" where a score chooses the checkpoint); `summary()` gives "steps", "best_step", "best_val_loss",
"final_train_loss", "stopped_early" and "resumed_from", and the timings apart under "timing".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mwpgen.early_stopping import EarlyStopping
from mwpgen.log_window import LogWindow
from mwpgen.resume import Checkpoints


@dataclass(frozen=True)
class StepResult:
    """What one step did: `stats` (its losses by name, "train_loss" among them) go into the history; `epoch` is the
    epoch it belonged to and `epoch_ended` whether it was that epoch's last; `learning_rate`, the one it used, is
    shown in the log."""

    stats: Mapping[str, float]
    epoch: int
    epoch_ended: bool = False
    learning_rate: float | None = None


@dataclass(frozen=True)
class ValidationSchedule:
    """When a span measures on the validation slice: every `every` steps (0: not by count), at each epoch's end
    (`at_epoch_end`), always at the span's last step, and before its first step when the run starts there
    (`at_start`: the starting point a trained model must beat)."""

    every: int
    at_epoch_end: bool
    at_start: bool

    def due(self, step: int, end: int, epoch_ended: bool) -> bool:
        return bool(self.every and step % self.every == 0) or step == end or (self.at_epoch_end and epoch_ended)


class Notes(dict):
    """A trainer's own resumable record (its data position, a measurement made once): saved and restored with the
    run like any of its `resumable` objects."""

    def state_dict(self) -> dict:
        return dict(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.clear()
        self.update(state)


@dataclass
class Trainer:
    """The loop and its bookkeeping (module docstring). `resumable`: name -> anything with state_dict() and
    load_state_dict() (models, optimizers, schedulers, a loss scaler, Notes). `on_validation(record)` gets each
    validation record; `on_step(step)` is called after each step and its checkpoint (the tests raise from it to
    simulate a kill)."""

    checkpoints: Checkpoints
    resumable: Mapping[str, Any]
    log: LogWindow
    on_validation: Callable[[dict], None] | None = None
    on_step: Callable[[int], None] | None = None
    # Where the run is, and what it recorded (all part of its state): the last step run, each step's record, each
    # validation's, each finished span's tags with its choice (best_step, best_val_loss, best_val_score, stopped_at).
    step: int = field(default=0, init=False)
    history: list[dict] = field(default_factory=list, init=False)
    validations: list[dict] = field(default_factory=list, init=False)
    spans: list[dict] = field(default_factory=list, init=False)
    resumed_from: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._wall_before, self._started = 0.0, time.perf_counter()
        self._stopping_state: dict | None = None
        state = self.checkpoints.load()
        if state is None:
            return
        for name, part in self.resumable.items():
            part.load_state_dict(state[name])
        run = state["trainer"]
        self.step, self.history, self.validations, self.spans = (run["step"], run["history"], run["validations"],
                                                                 run["spans"])
        self.log.load_state_dict(run["log"])
        self._wall_before, self._stopping_state = run["wall_s"], state["stopping"]
        self.resumed_from = self.step
        print(f"resuming from {self.checkpoints.state_dir} at step {self.step}", flush=True)

    @property
    def wall_s(self) -> float:
        """Seconds of training, over every run that resumed this one."""
        return self._wall_before + time.perf_counter() - self._started

    def fit(self, step: Callable[[int], StepResult], validate: Callable[[], dict] | None, *, end: int,
            stopping: EarlyStopping, schedule: ValidationSchedule, start: int = 0,
            tags: Mapping[str, object] | None = None, on_fresh_start: Callable[[], None] | None = None,
            save_at_end: bool = False) -> None:
        """Run the span of steps start+1 .. end from wherever the run is (module docstring). `validate()` returns
        {"val_loss", optionally "val_score"} (None: no validation slice, nothing measured); `stopping` chooses the
        span's best weights and says when patience has run out; `tags` (e.g. {"phase": 2}) go into every record of
        the span; `save_at_end`: another span follows, so the state is saved at this one's end."""
        tags = dict(tags or {})
        if self._stopping_state is not None and start < self.step < end:  # resumed inside this span
            stopping.load_state_dict(self._stopping_state)
            self._stopping_state = None
        if start == self.step < end:
            if schedule.at_start and validate is not None:
                self._validate(validate, stopping, 0, tags)
            if on_fresh_start is not None:
                on_fresh_start()
        while self.step < end:
            self.step += 1
            began = time.perf_counter()
            result = step(self.step)
            self.history.append({"step": self.step, **tags, "epoch": result.epoch, **result.stats,
                                 "step_s": time.perf_counter() - began})
            self.log.end_step(self.step, end, result.epoch, tags, result.learning_rate)
            if validate is not None and schedule.due(self.step, end, result.epoch_ended):
                self._validate(validate, stopping, result.epoch, tags)
            stopped = stopping.out_of_patience and self.step < end
            ran = self.step  # a span that stops early still ends at `end`: the next span starts there
            if stopped or self.step == end:
                if self.log.is_open:
                    self.log.close(self.step, result.epoch, tags, result.learning_rate)
                self._finish_span(stopping, tags, stopped)
                self.step = end
                if save_at_end and self.checkpoints.kept:
                    self._save(None)
            elif self.checkpoints.kept and self.step % self.checkpoints.save_every == 0:
                self._save(stopping.state_dict(self.step))
            if self.on_step is not None:
                self.on_step(ran)

    def _validate(self, validate: Callable[[], dict], stopping: EarlyStopping, epoch: int,
                  tags: Mapping[str, object]) -> None:
        measured = validate()
        stopping.measure(self.step, measured["val_loss"], measured.get("val_score"))
        record = {"step": self.step, **tags, "epoch": epoch, **measured, "best_val_loss": stopping.best_loss,
                  "best_step": stopping.best_step}
        if "val_score" in measured:
            record["best_val_score"] = stopping.best_score
        self.validations.append(record)
        shown = " ".join(f"{k} {v:.4f}" for k, v in measured.items())
        best = stopping.best_score if "val_score" in measured else stopping.best_loss
        print(f"validation at step {self.step} {' '.join(f'{k} {v}' for k, v in tags.items())}: {shown} "
              f"(best {best:.4f} at step {stopping.best_step})", flush=True)
        if self.on_validation is not None:
            self.on_validation(record)

    def _finish_span(self, stopping: EarlyStopping, tags: Mapping[str, object], stopped: bool) -> None:
        if stopped:
            print(f"no better validation in {stopping.patience} measurements: stopping at step {self.step}",
                  flush=True)
        stopping.restore()  # the checkpoint choice: the best validation score, else the lowest loss
        self.spans.append({**tags, "best_step": stopping.best_step,
                           "best_val_loss": None if math.isinf(stopping.best_loss) else stopping.best_loss,
                           "best_val_score": stopping.best_score, "stopped_at": self.step if stopped else None})

    def _save(self, stopping_state: dict | None) -> None:
        self.checkpoints.save({**{name: part.state_dict() for name, part in self.resumable.items()},
                               "stopping": stopping_state,
                               "trainer": {"step": self.step, "history": self.history,
                                           "validations": self.validations, "spans": self.spans,
                                           "log": self.log.state_dict(), "wall_s": self.wall_s}})

    def summary(self) -> dict:
        """What every trainer reports by the same names (module docstring): the last span that measured gives the
        best step and loss (ours: phase 2's, the generator's)."""
        measured = [s for s in self.spans if s["best_step"] is not None]
        chosen = measured[-1] if measured else {}
        losses = [h["train_loss"] for h in self.history if "train_loss" in h]
        step_s = [h["step_s"] for h in self.history]
        return {"steps": len(self.history), "best_step": chosen.get("best_step"),
                "best_val_loss": chosen.get("best_val_loss"), "best_val_score": chosen.get("best_val_score"),
                "final_train_loss": losses[-1] if losses else None,
                "stopped_early": any(s["stopped_at"] is not None for s in self.spans),
                "resumed_from": self.resumed_from, "history": self.history, "validations": self.validations,
                "log": self.log.records, "spans": self.spans,
                "timing": {"wall_s": self.wall_s, "step_s": sum(step_s) / len(step_s) if step_s else None}}
