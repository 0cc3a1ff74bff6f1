"""Resumable training, for every trainer: one state file per run, written atomically, read without running code.

A state holds whatever the trainer needs (model and optimizer state dicts, the step, the loss history, best-so-far
weights) plus the torch / Python / CUDA RNG states and a fingerprint of everything that shapes the run (settings,
data): a killed run restarts from it and ends where an uninterrupted run ends; a state written by another
configuration is refused by name, never silently resumed. `torch.load(weights_only=True)`: whoever can drop a
file there cannot make it run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

STATE_FILE = "state.pt"
# The layout of a state (mwpgen/trainer.py writes it): part of every state's fingerprint, so a state of an older
# layout is refused by name (ResumeMismatch) rather than misread.
STATE_LAYOUT = "trainer-1"


class ResumeMismatch(RuntimeError):
    """The saved training state belongs to a different run configuration."""


def fingerprint(**parts: Any) -> str:
    """sha256 of what shapes a run (anything JSON can write, other values by their str)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def state_path(resume_dir: str | os.PathLike) -> Path:
    """The state file of a run that keeps its resumable state in `resume_dir`."""
    return Path(resume_dir) / STATE_FILE


def save(path: str | os.PathLike, fp: str, state: dict) -> None:
    """Write `state` with its fingerprint and the RNG states; a kill mid-write leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save({**state, "fingerprint": fp, "rng": rng_state()}, tmp)
    os.replace(tmp, path)


def load(path: str | os.PathLike, fp: str) -> dict | None:
    """The state at `path` (RNG states restored), None if there is none; a foreign state raises ResumeMismatch."""
    path = Path(path)
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("fingerprint") != fp:
        raise ResumeMismatch(
            f"{path} was written by a run with different settings or data; delete it to start over "
            f"(saved fingerprint {str(state.get('fingerprint'))[:12]}, this run {fp[:12]})")
    set_rng_state(state["rng"])
    return state


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A CPU copy of `module`'s weights: the best-so-far weights a trainer keeps while it goes on training."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


def remove(resume_dir: str | os.PathLike | None) -> None:
    """Delete a finished run's state (and its folder, when nothing else is in it): the saved model supersedes it."""
    if resume_dir is None:
        return
    (Path(resume_dir) / STATE_FILE).unlink(missing_ok=True)
    try:
        Path(resume_dir).rmdir()
    except OSError:
        pass


@dataclass
class Checkpoints:
    """Where a run keeps its resumable state (`state_dir/state.pt`, None: nowhere) and how often (`save_every`
    steps); `fingerprint`: what shapes the run (`fingerprint(...)`)."""

    state_dir: str | os.PathLike | None
    fingerprint: str
    save_every: int

    @property
    def kept(self) -> bool:
        """Whether the run keeps a state at all: without a folder, none is built (a state is every model's weights)."""
        return self.state_dir is not None

    @property
    def _stamp(self) -> str:
        return fingerprint(run=self.fingerprint, layout=STATE_LAYOUT)

    def load(self) -> dict | None:
        return load(state_path(self.state_dir), self._stamp) if self.kept else None

    def save(self, state: dict) -> None:
        save(state_path(self.state_dir), self._stamp, state)

    def remove(self) -> None:
        remove(self.state_dir)
