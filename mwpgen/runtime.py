"""Where and in what precision a model runs: one choice for every trainer and decoder."""

from __future__ import annotations

import torch


def resolve_device(device: str) -> str:
    """`train.device` -> a torch device string: auto = CUDA when one is visible, else CPU."""
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device = cuda, but no CUDA device is visible; use auto or cpu")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def autocast_dtype(device: str | torch.device, mixed_precision: bool) -> torch.dtype | None:
    """The autocast dtype of training (None = fp32): bf16 on CUDA where supported, else fp16 (which needs
    `needs_grad_scaler`). CPU trains in fp32."""
    if not mixed_precision or torch.device(device).type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def needs_grad_scaler(dtype: torch.dtype | None) -> bool:
    """fp16 gradients underflow without loss scaling; bf16 and fp32 need none."""
    return dtype == torch.float16
