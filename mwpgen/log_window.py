"""The training log of every trainer: what its steps measured since the last log point, closed into one record every
`every` steps, at the end of a span of steps and where a run stops early.

A step adds sums with the count they are over (a micro-batch's mean loss and 1, a batch's summed NLL and its token
count, a step's losses and 1); a record holds each name's sum / count over the window, so a window's loss is
weighted as its step computed it. Throughput and seconds per step are timings: they go under their own names
(`TIMING`), apart from the losses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

# The names of a log record that are timings, not measurements of the model.
TIMING = ("step_s", "tokens_per_s", "examples_per_s")


class LogWindow:
    """Sums since the last log point; `records`: every record closed so far (each also printed and passed to
    `on_log`); `tokens`, `examples`: totals over the run."""

    def __init__(self, every: int, total_steps: int, on_log: Callable[[dict], None] | None = None):
        self.every, self.total, self.on_log = every, total_steps, on_log
        self.records: list[dict] = []
        self.tokens = self.examples = 0
        self._open()

    def _open(self) -> None:
        self._since = time.perf_counter()
        self._sums: dict[str, float] = {}
        self._counts: dict[str, float] = {}
        self._steps = self._tokens = self._examples = 0

    def add(self, sums: Mapping[str, float], count: float = 1, *, tokens: int = 0, examples: int = 0) -> None:
        """`sums` (name -> a sum over `count` things, e.g. {"train_loss": summed NLL} over n tokens)."""
        for name, value in sums.items():
            self._sums[name] = self._sums.get(name, 0.0) + value
            self._counts[name] = self._counts.get(name, 0) + count
        self._tokens += tokens
        self._examples += examples
        self.tokens += tokens
        self.examples += examples

    @property
    def is_open(self) -> bool:
        """Whether a step ended since the last record."""
        return self._steps > 0

    def end_step(self, step: int, end: int, epoch: int, tags: Mapping[str, object], lr: float | None) -> None:
        """A step ended: close the window at a log point (every `every` steps, and the span's last step `end`)."""
        self._steps += 1
        if step % self.every == 0 or step == end:
            self.close(step, epoch, tags, lr)

    def close(self, step: int, epoch: int, tags: Mapping[str, object], lr: float | None) -> None:
        elapsed = max(time.perf_counter() - self._since, 1e-9)
        record = {"step": step, **tags, "epoch": epoch,
                  **{name: total / max(1, self._counts[name]) for name, total in self._sums.items()}}
        if lr is not None:
            record["lr"] = lr
        record["step_s"] = elapsed / max(1, self._steps)
        if self._tokens:
            record |= {"tokens_per_s": self._tokens / elapsed, "examples_per_s": self._examples / elapsed}
        self.records.append(record)
        shown = " ".join(f"{k} {v:.4g}" for k, v in record.items() if k not in ("step", "epoch", *tags, *TIMING))
        print(f"step {step}/{self.total} ep {epoch} {shown} ({record['step_s']:.3g} s/step)", flush=True)
        if self.on_log is not None:
            self.on_log(record)
        self._open()

    def state_dict(self) -> dict:
        """What a resumed run needs to log the same records: the records so far, the open window's sums, the totals."""
        return {"records": list(self.records), "sums": dict(self._sums), "counts": dict(self._counts),
                "window": [self._steps, self._tokens, self._examples], "totals": [self.tokens, self.examples]}

    def load_state_dict(self, state: dict) -> None:
        self.records = list(state["records"])
        self._open()
        self._sums, self._counts = dict(state["sums"]), dict(state["counts"])
        self._steps, self._tokens, self._examples = state["window"]
        self.tokens, self.examples = state["totals"]
