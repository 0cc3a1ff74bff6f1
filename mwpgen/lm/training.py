"""Fine-tuning a causal LM on prompt -> target examples (nanoGPT-style loop, kept readable).

Trains the generator with L_LM (paper Eq. 3) or mwp2eq with its NLL (Eq. 4); which one
depends only on the examples (see prompts.py). Paper setting (supplementary Table "Model
configurations"): Adam, lr 5e-5, batch 8, 20 epochs for the GPT baselines.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from mwpgen.lm.loading import atomic_save_pretrained
from mwpgen.lm.prompts import IGNORE_INDEX, LMExample, collate, encode_example
from mwpgen.runtime import ProgressLog, autocast_dtype, needs_grad_scaler

Examples = Sequence[LMExample] | Callable[[int], Sequence[LMExample]]


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Eq. 3: -log p(m_t | E, c, m_<t) over target positions (labels != -100), averaged per token
    rather than summed so the learning rate does not depend on problem length."""
    shift_logits = logits[:, :-1, :].float()  # position t predicts token t+1
    shift_labels = labels[:, 1:]
    return F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def _batches(n: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)  # reproducible per (seed, epoch)
    order = torch.randperm(n, generator=g).tolist()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def train_causal_lm(
    model: torch.nn.Module,
    tokenizer,
    examples: Examples,
    *,
    epochs: int,
    batch_size: int,
    lr: float = 5e-5,
    max_length: int = 128,
    seed: int = 0,
    device: str | torch.device = "cpu",
    mixed_precision: bool = True,
    checkpoint_dir: Path | None = None,
    log_every: int = 10,
    on_log: Callable[[dict], None] | None = None,
    max_steps: int | None = None,
    grad_accum: int = 1,
    max_grad_norm: float = 1.0,
) -> dict[str, Any]:
    """Fine-tune `model` on `examples` (a list, or `epoch -> list` for fresh keyword dropout per
    epoch). One optimizer step = `grad_accum` micro-batches of `batch_size`. Returns
    {"losses": per-step losses, "log": on_log records, "steps", "tokens", "wall_time_s", "checkpoint_dir"}.
    """
    device = torch.device(device)
    torch.manual_seed(seed)
    model.to(device).train()
    # AdamW with weight_decay=0 is Adam, the paper's optimizer.
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    amp_dtype = autocast_dtype(device, mixed_precision)
    scaler = torch.amp.GradScaler("cuda") if needs_grad_scaler(amp_dtype) else None

    get_examples = examples if callable(examples) else (lambda _epoch: examples)
    n_examples = len(get_examples(0))
    steps_per_epoch = math.ceil(math.ceil(n_examples / batch_size) / grad_accum)
    total_steps = epochs * steps_per_epoch if max_steps is None else min(max_steps, epochs * steps_per_epoch)

    step, epoch, losses = 0, 0, []
    progress = ProgressLog(total_steps, log_every, on_log)
    t_start = time.perf_counter()
    total_tokens = 0

    while epoch < epochs and step < total_steps:
        encoded = [encode_example(tokenizer, ex, max_length) for ex in get_examples(epoch)]
        micro_batches = _batches(len(encoded), batch_size, seed, epoch)
        for start in range(0, len(micro_batches), grad_accum):
            if step >= total_steps:
                break
            group = micro_batches[start : start + grad_accum]
            step_loss = 0.0
            for idx in group:
                batch = {k: v.to(device) for k, v in collate([encoded[i] for i in idx], tokenizer.pad_token_id).items()}
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                    loss = lm_loss(logits, batch["labels"])
                scaled = loss / len(group)
                (scaler.scale(scaled) if scaler is not None else scaled).backward()
                step_loss += loss.item() / len(group)
                n_tok = int(batch["attention_mask"].sum())
                progress.add(loss.item(), 1, n_tok, len(idx))
                total_tokens += n_tok
            if scaler is not None:
                scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            if scaler is not None:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            losses.append(step_loss)

            progress.step(step, epoch, lr)
        epoch += 1

    model.eval()
    wall = time.perf_counter() - t_start
    if checkpoint_dir is not None:
        atomic_save_pretrained(model, tokenizer, Path(checkpoint_dir))
    return {"losses": losses, "log": progress.records, "steps": step, "tokens": total_tokens,
            "wall_time_s": wall, "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None}
