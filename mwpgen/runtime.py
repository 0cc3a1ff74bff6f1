"""Where and in what precision a model runs, and how training reports progress: one choice for every trainer."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

import torch

# The kernel's names (/proc/cpuinfo "flags") for native bf16 arithmetic.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def resolve_device(device: str) -> str:
    """`train.device` -> a torch device string: auto = CUDA when one is visible, else CPU."""
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device = cuda, but no CUDA device is visible; use auto or cpu")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def cpu_supports_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16): there bf16 autocast trains faster than
    fp32. Without it oneDNN emulates bf16 and fp32 is the faster choice. Read from the kernel's CPU flags (Linux);
    where there are none to read (another OS), fp32."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return bool(flags & BF16_CPU_FLAGS) and torch.backends.mkldnn.is_available()


def autocast_dtype(device: str | torch.device, mixed_precision: bool) -> torch.dtype | None:
    """The autocast dtype of training (None = fp32): on CUDA bf16 where supported, else fp16 (which needs
    `needs_grad_scaler`); on CPU bf16 where the CPU computes it natively (`cpu_supports_bf16`), else fp32.
    Weights, optimizer state and losses stay fp32 (autocast only lowers the matmuls); decoding never autocasts."""
    if not mixed_precision:
        return None
    kind = torch.device(device).type
    if kind == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if kind == "cpu" and cpu_supports_bf16():
        return torch.bfloat16
    return None


def needs_grad_scaler(dtype: torch.dtype | None) -> bool:
    """fp16 gradients underflow without loss scaling; bf16 and fp32 need none."""
    return dtype == torch.float16


class ProgressLog:
    """The training-log window shared by every trainer: sums since the last log point, and every `every` steps
    (and at the last one) a record {step, epoch, loss, ppl, lr, tokens_per_s, examples_per_s} that is printed,
    kept in `records` and passed to `on_log`. `loss` = summed loss / summed count of the window."""

    def __init__(self, total_steps: int, every: int, on_log: Callable[[dict], None] | None = None):
        self.total, self.every, self.on_log = total_steps, every, on_log
        self.records: list[dict] = []
        self._reset()

    def _reset(self) -> None:
        self._since, self._loss, self._count, self._tokens, self._examples = time.perf_counter(), 0.0, 0, 0, 0

    def state_dict(self) -> dict:
        """What a resumed run needs to log the same records: the records so far and the open window's sums."""
        return {"records": list(self.records), "window": [self._loss, self._count, self._tokens, self._examples]}

    def load_state_dict(self, state: dict) -> None:
        self.records = list(state["records"])
        self._reset()
        self._loss, self._count, self._tokens, self._examples = state["window"]

    def add(self, loss_sum: float, count: int, tokens: int, examples: int) -> None:
        self._loss += loss_sum
        self._count += count
        self._tokens += tokens
        self._examples += examples

    def step(self, step: int, epoch: int, lr: float, force: bool = False) -> None:
        """Close the window at a log point (`force`: here, e.g. the last step of a run stopped early)."""
        if step % self.every and step != self.total and not force:
            return
        elapsed = max(time.perf_counter() - self._since, 1e-9)
        loss = self._loss / max(1, self._count)
        record = {"step": step, "epoch": epoch, "loss": loss, "ppl": math.exp(min(loss, 50.0)), "lr": lr,
                  "tokens_per_s": self._tokens / elapsed, "examples_per_s": self._examples / elapsed}
        self.records.append(record)
        print(f"step {step}/{self.total} ep {epoch} loss {loss:.4f} ppl {record['ppl']:.2f} lr {lr:.3g} "
              f"tok/s {record['tokens_per_s']:.0f}", flush=True)
        if self.on_log is not None:
            self.on_log(record)
        self._reset()
