"""FLOP accounting shared by the benches: a dense-matmul reference rate and the matmul weights of a model."""

from __future__ import annotations

import time

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


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
