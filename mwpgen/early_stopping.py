"""Early stopping with best weights: the checkpoint choice every trainer makes on its validation measurements."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from mwpgen import resume


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
