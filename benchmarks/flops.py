"""FLOP and byte accounting shared by the benches: a dense-matmul reference rate, a memory-copy reference rate and
the matmul weights of a model."""

from __future__ import annotations

import time

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: torch.device) -> float:
    """Seconds one call of `fn` takes, the device's queued work included."""
    sync(device)
    t = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, reps: int) -> float:
    """FLOP/s of the fastest of `reps` dense n x n matmuls in `dtype` (after two warm-up products)."""
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - t)
    return 2 * n**3 / min(times)


def matmul_params(model) -> int:
    """Parameters that take part in matmuls: an untied input embedding (a lookup) is left out, a tied one counts
    once (the LM head)."""
    n = sum(p.numel() for p in model.parameters())
    emb, out = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    return n if emb is out else n - emb.numel()


def memory_rate(device: torch.device, mib: int = 512, reps: int = 5) -> float:
    """Bytes/s moved by the fastest of `reps` copies of a `mib` MiB buffer (read + write counted), a reference for
    memory-bound work such as reading a model's weights once per decoding step."""
    src = torch.empty(mib * 2**20 // 4, device=device, dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        dst.copy_(src)
        sync(device)
        times.append(time.perf_counter() - t)
    return 2 * src.numel() * src.element_size() / min(times)
