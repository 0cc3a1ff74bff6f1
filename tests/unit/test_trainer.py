"""mwpgen/trainer.py: the one loop every trainer runs, on a one-weight model whose steps draw from the global RNG
(as dropout does), so a resume that lost an RNG state or a step would show."""

from __future__ import annotations

import pytest
import torch

from mwpgen import resume
from mwpgen.early_stopping import EarlyStopping
from mwpgen.log_window import LogWindow
from mwpgen.resume import Checkpoints, ResumeMismatch
from mwpgen.trainer import Notes, StepResult, Trainer, ValidationSchedule

STEPS_PER_EPOCH = 3


class Killed(Exception):
    pass


def kill_at(killed_step: int):
    def kill(step: int) -> None:
        if step == killed_step:
            raise Killed

    return kill


class Toy:
    """w learns towards 1 under noisy gradients; validation loss (w - target)^2 for a target the test picks."""

    def __init__(self, state_dir=None, save_every=2, log_every=2, on_step=None, on_log=None, fingerprint="toy"):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(1, 1, bias=False)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.notes = Notes(seen=0)
        self.log = LogWindow(log_every, 100, on_log)
        self.trainer = Trainer(Checkpoints(state_dir, fingerprint, save_every),
                               {"model": self.model, "optimizer": self.optimizer, "notes": self.notes}, self.log,
                               on_step=on_step)

    def step(self, step: int) -> StepResult:
        w = self.model.weight[0, 0]
        loss = (w - 1.0) ** 2 + 0.1 * torch.randn(()) * w
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.notes["seen"] += 1
        self.log.add({"train_loss": loss.item() * 2}, 2, tokens=4, examples=1)  # a sum over 2 things
        return StepResult({"train_loss": loss.item()}, (step - 1) // STEPS_PER_EPOCH, step % STEPS_PER_EPOCH == 0)

    def validate_towards(self, target: float):
        return lambda: {"val_loss": (self.model.weight[0, 0] - target).item() ** 2}

    def fit(self, end: int, target: float = 1.0, patience: int = 0, every: int = 2, **kw) -> EarlyStopping:
        stopping = EarlyStopping({"model": self.model}, patience)
        self.trainer.fit(self.step, self.validate_towards(target), end=end, stopping=stopping,
                         schedule=ValidationSchedule(every=every, at_epoch_end=False, at_start=True), **kw)
        return stopping


def strip(history):
    return [{k: v for k, v in h.items() if k != "step_s"} for h in history]


def test_the_schedule_measures_every_n_steps_at_epoch_ends_and_at_the_last_step():
    schedule = ValidationSchedule(every=4, at_epoch_end=True, at_start=False)
    assert [s for s in range(1, 11) if schedule.due(s, 10, s % 3 == 0)] == [3, 4, 6, 8, 9, 10]
    by_count = ValidationSchedule(every=0, at_epoch_end=False, at_start=False)
    assert [s for s in range(1, 11) if by_count.due(s, 10, s % 3 == 0)] == [10]


def test_a_killed_run_resumes_to_the_uninterrupted_one(tmp_path):
    ref = Toy()
    ref.fit(9)

    with pytest.raises(Killed):
        Toy(tmp_path / "state", on_step=kill_at(5)).fit(9)
    resumed = Toy(tmp_path / "state")  # restores as it is built: the state of step 4
    assert resumed.trainer.resumed_from == 4 and resumed.notes["seen"] == 4
    resumed.fit(9)
    assert torch.equal(resumed.model.weight, ref.model.weight)
    assert strip(resumed.trainer.history) == strip(ref.trainer.history) and resumed.notes["seen"] == 9
    assert resumed.trainer.validations == ref.trainer.validations
    assert [r["step"] for r in resumed.trainer.validations] == [0, 2, 4, 6, 8, 9]  # a fresh run starts measured
    pick = lambda records: [(r["step"], r["train_loss"]) for r in records]  # noqa: E731 — a one-line local helper
    assert pick(resumed.log.records) == pick(ref.log.records) and resumed.log.tokens == ref.log.tokens == 36


def test_patience_stops_the_run_on_the_best_weights_and_logs_the_last_window(tmp_path):
    toy = Toy(tmp_path / "state", log_every=4)
    initial = toy.model.weight.detach().clone()
    # Validation towards -1: w moves away from it, so the starting point (step 0) stays the best.
    stopping = toy.fit(20, target=-1.0, patience=2, every=1)
    summary = toy.trainer.summary()
    assert summary["steps"] == 2 and summary["stopped_early"] and summary["best_step"] == 0
    assert toy.trainer.spans == [{"best_step": 0, "best_val_loss": stopping.best_loss, "best_val_score": None,
                                  "stopped_at": 2}]
    assert [r["step"] for r in toy.log.records] == [2]  # the partial window, at the step the run stopped
    assert torch.equal(toy.model.weight, initial)  # the starting point's weights are back
    assert not (tmp_path / "state" / "state.pt").exists()  # nothing saved where the run stops


def test_the_log_window_weighs_each_sum_by_its_count():
    log = LogWindow(every=2, total_steps=2)
    log.add({"train_loss": 6.0}, 3, tokens=10)
    log.end_step(1, 2, 0, {}, None)
    log.add({"train_loss": 2.0, "eq": 1.0}, 1, tokens=10)
    log.end_step(2, 2, 0, {"phase": 1}, 0.5)
    (record,) = log.records
    assert record["train_loss"] == 2.0 and record["eq"] == 1.0 and record["phase"] == 1 and record["lr"] == 0.5
    assert log.tokens == 20 and record["tokens_per_s"] > 0 and not log.is_open


def test_two_spans_save_at_the_boundary_and_start_the_second_once(tmp_path):
    """As ours' phases: a state at the first span's end; killed right after it, the rerun starts the second span
    from there, measuring its starting point and running its start hook exactly once."""
    def run(toy):
        started = []
        toy.fit(4, tags={"phase": 1}, save_at_end=True)
        toy.fit(7, start=4, tags={"phase": 2}, on_fresh_start=lambda: started.append(toy.trainer.step))
        return started

    ref = Toy()
    assert run(ref) == [4]

    with pytest.raises(Killed):
        run(Toy(tmp_path / "state", save_every=100, on_step=kill_at(4)))
    resumed = Toy(tmp_path / "state", save_every=100)
    assert resumed.trainer.resumed_from == 4 and run(resumed) == [4]
    assert torch.equal(resumed.model.weight, ref.model.weight)
    assert resumed.trainer.validations == ref.trainer.validations
    measured = [(v["step"], v["phase"]) for v in ref.trainer.validations]
    assert measured == [(0, 1), (2, 1), (4, 1), (4, 2), (6, 2), (7, 2)]
    assert [s["phase"] for s in resumed.trainer.spans] == [1, 2]


def test_a_state_of_another_run_or_layout_is_refused(tmp_path, monkeypatch):
    with pytest.raises(Killed):
        Toy(tmp_path / "state", on_step=kill_at(3)).fit(5)
    with pytest.raises(ResumeMismatch):
        Toy(tmp_path / "state", fingerprint="another run")
    monkeypatch.setattr(resume, "STATE_LAYOUT", "a later layout")
    with pytest.raises(ResumeMismatch):
        Toy(tmp_path / "state")
