"""The training core every trainer shares (causal LM, seq2seq, ours): seeded batches, validation with early stopping
and best weights, and the loop that runs steps between them, resumable from a state file (mwpgen/resume.py).

A trainer supplies what differs: its step (one optimizer update, whatever its loss), its validation measurement
and when one is due, and what else its resumable state holds (optimizer, schedulers, history). The loop owns the
order every trainer must keep, so a fix to early stopping or resumption is made once:

    for each step:  the trainer's step  ->  validation if due  ->  stop when patience has run out
                    ->  the resumable state every `save_every` steps (never at the run's end)  ->  on_step(step)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from mwpgen import resume


# Batches per pool of length-grouped batching: wide enough that a pool's sorted lengths leave little padding, narrow
# enough that a batch still holds examples from all over the epoch's order (Hugging Face's group_by_length uses 50).
LENGTH_POOL_BATCHES = 50


def seeded_batches(n: int, batch_size: int, seed: int, stream: int,
                   lengths: Sequence[int] | None = None) -> list[list[int]]:
    """One epoch's batches of indices into n examples, a pure function of (seed, stream[, lengths]): a resumed run, a
    second rank or a second machine draws the same ones. Trainers give each epoch (and phase) its own stream.

    With `lengths` (each example's token count) the batches are length-grouped: the seeded order is cut into pools
    of LENGTH_POOL_BATCHES batches, each pool sorted by length and cut into batches, and the batches shuffled by the
    same generator. A batch is padded to its longest example, so grouping computes fewer padding tokens (about 25 %
    of an Arithmetic epoch at batch 8 padded at random, about 5 % grouped: benchmarks/bench_length_grouping.py)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + stream)
    order = torch.randperm(n, generator=g).tolist()
    if lengths is None:
        return [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if len(lengths) != n:
        raise ValueError(f"{len(lengths)} lengths for {n} examples")
    pool = LENGTH_POOL_BATCHES * batch_size
    batches = []
    for start in range(0, n, pool):
        ranked = sorted(order[start : start + pool], key=lambda i: lengths[i])  # stable: ties keep the seeded order
        batches += [ranked[i : i + batch_size] for i in range(0, len(ranked), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]


@dataclass
class EarlyStopping:
    """The best validation result so far, the weights that gave it, and the patience left.

    Better means a lower loss; with scores (`measure(..., score=)`, higher is better), a higher score, ties going
    to the lower loss. `patience` measurements in a row without a better one run it out (0: never)."""

    modules: Mapping[str, torch.nn.Module]
    patience: int
    best_loss: float = math.inf
    best_score: float | None = None
    best_step: int | None = None
    bad: int = 0
    weights: dict[str, dict[str, torch.Tensor]] | None = field(default=None, repr=False)

    def measure(self, step: int, loss: float, score: float | None = None) -> bool:
        """Record a measurement at `step`; keep the weights if it is the best so far. True when it is."""
        if score is None:
            better = loss < self.best_loss
        else:
            better = self.best_score is None or (score, -loss) > (self.best_score, -self.best_loss)
        if better:
            self.best_loss, self.best_score, self.best_step, self.bad = loss, score, step, 0
            self.weights = {name: resume.snapshot(m) for name, m in self.modules.items()}
        else:
            self.bad += 1
        return better

    @property
    def out_of_patience(self) -> bool:
        return self.patience > 0 and self.bad >= self.patience

    def restore(self) -> None:
        """The best weights back into the modules (the checkpoint choice); nothing if nothing was measured."""
        if self.weights is not None:
            for name, m in self.modules.items():
                m.load_state_dict(self.weights[name])

    def state_dict(self, step: int) -> dict:
        """For a resumable state saved at `step`: the best weights are stored only when they are not the current
        ones (the state holds those already), so a state is not twice the model's size for nothing."""
        current = self.best_step == step
        return {"best_loss": self.best_loss, "best_score": self.best_score, "best_step": self.best_step,
                "bad": self.bad, "best_is_current": current, "weights": None if current else self.weights}

    def load_state_dict(self, state: dict) -> None:
        """After the modules' own weights were loaded from the same state."""
        self.best_loss, self.best_score = state["best_loss"], state["best_score"]
        self.best_step, self.bad = state["best_step"], state["bad"]
        self.weights = ({name: resume.snapshot(m) for name, m in self.modules.items()} if state["best_is_current"]
                        else state["weights"])


@dataclass
class Checkpoints:
    """Where a run keeps its resumable state (`state_dir/state.pt`, None: nowhere) and how often."""

    state_dir: object | None
    fingerprint: str
    save_every: int

    @property
    def kept(self) -> bool:
        """Whether the run keeps a state at all: without a folder, none is built (a state is every model's weights)."""
        return self.state_dir is not None

    def load(self) -> dict | None:
        return resume.load(resume.state_path(self.state_dir), self.fingerprint) if self.kept else None

    def save(self, state: dict) -> None:
        resume.save(resume.state_path(self.state_dir), self.fingerprint, state)

    def remove(self) -> None:
        resume.remove(self.state_dir)


def run_steps(start: int, end: int, *, step: Callable[[int], bool], after_step: Callable[[int, bool], bool],
              checkpoints: Checkpoints, state: Callable[[int], dict],
              on_step: Callable[[int], None] | None = None) -> int:
    """Steps start+1 .. end (1-based). `step(s)` runs step s and says whether it ended an epoch; `after_step(s,
    epoch_ended)` measures on the validation slice when the trainer's schedule says so and says whether to stop
    (patience run out); then the resumable `state(s)` is saved every `checkpoints.save_every` steps, unless the
    run stops or ends there (its final model supersedes the state), and `on_step(s)` is called (the tests raise
    from it to simulate a kill). Returns the last step run: `end`, or the step it stopped at."""
    s = start
    while s < end:
        s += 1
        stop = after_step(s, step(s))
        if checkpoints.kept and s < end and not stop and s % checkpoints.save_every == 0:
            checkpoints.save(state(s))
        if on_step is not None:
            on_step(s)
        if stop:
            break
    return s
