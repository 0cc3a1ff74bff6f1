"""The machine a benchmark ran on, in one line, for every figure it prints: CPU kinds here differ by 2x and more."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_name() -> str:
    """/proc/cpuinfo's model name (e.g. "AMD EPYC", "Intel(R) Xeon(R) Processor @ 2.10GHz"), "?" elsewhere."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")


def describe() -> str:
    """CPU model, count, whether it has native bf16 (AVX512-BF16 / AMX) and the load average at the call."""
    info = Path("/proc/cpuinfo")
    flags = info.read_text() if info.exists() else ""
    bf16 = [name for name in ("avx512_bf16", "amx_bf16") if name in flags]
    return (f"{cpu_name()}, {os.cpu_count()} CPUs, {'+'.join(bf16) if bf16 else 'no native bf16 (AVX2 or older)'}, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
