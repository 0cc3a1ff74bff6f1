"""Where and in what precision a model runs: one choice for every trainer."""

from __future__ import annotations

from pathlib import Path

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


def _cpuinfo(cpuinfo: Path) -> tuple[str, set[str]]:
    """The CPU's model name and flags from the kernel's cpuinfo ("", set() where there is none to read)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return "", set()
    name, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
        elif key.strip() == "model name" and not name:
            name = value.strip()
    return name, flags


def cpu_supports_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX-BF16): there bf16 autocast trains faster than
    fp32. Without it oneDNN emulates bf16 and fp32 is the faster choice. Read from the kernel's CPU flags (Linux);
    where there are none to read (another OS), fp32."""
    return bool(_cpuinfo(cpuinfo)[1] & BF16_CPU_FLAGS) and torch.backends.mkldnn.is_available()


def cpu_kind(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """{"cpu": its model name, "kind": "AVX512-BF16" (bf16 autocast), "AVX2-only" (fp32, about half the speed) or
    "other"}: what a result trained here should say it came from, since the two kinds round differently."""
    name, flags = _cpuinfo(cpuinfo)
    kind = "AVX512-BF16" if flags & BF16_CPU_FLAGS else "AVX2-only" if "avx2" in flags else "other"
    return {"cpu": name or "unknown", "kind": kind}


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
