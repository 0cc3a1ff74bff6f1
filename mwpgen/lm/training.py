"""Fine-tuning a causal LM on prompt -> target examples (nanoGPT-style loop, kept readable).

Trains the generator with L_LM (paper Eq. 3) or mwp2eq with its NLL (Eq. 4); which one
depends only on the examples (see prompts.py). Paper setting (supplementary Table "Model
configurations"): Adam, lr 5e-5, batch 8, 20 epochs for the GPT baselines.

Precision: `mixed_precision` trains under autocast where it pays (mwpgen.device.autocast_dtype: bf16 on CUDA and on
CPUs with native bf16, fp16 + loss scaling on older GPUs); weights, Adam state and losses stay fp32.

Validation, early stopping, checkpoint choice: with `validation` examples, the validation loss (the training loss,
teacher-forced, token-weighted over the whole slice, in eval mode) is measured before the first step, every
`eval_every` steps and at the end of each epoch (and of the run). The weights of the lowest validation loss are
the returned (and saved) model; `patience` evaluations in a row without a lower loss stop the run early; `epochs`
(and `max_steps`) stay the cap. With `val_score` (a score of the model to maximise, e.g. the evaluator's exact
parse accuracy on the validation slice, whose loss keeps falling after its parses stop improving -- and the other
way round), the best score (ties: the lower loss) chooses the weights and drives the patience instead; the loss is
still measured and recorded.

The loop, its validation schedule, early stopping, log window and resumable state are mwpgen/trainer.py's; this
module supplies the step and the validation.

Resume: with `resume_dir`, every `save_every` steps the whole state -- model and optimizer (and loss-scaler)
states, step, the best weights so far and their loss, the patience count, the torch RNG states, the loss and
validation histories and the open log window -- is written atomically to `resume_dir/state.pt` (plain tensors
and containers: `torch.load(weights_only=True)` reads it, a state file can never run code). Step s's batch is a
pure function of (seed, epoch, position), so a killed run restarted with the same arguments resumes from the
last state and, on the same machine, ends bit-for-bit where the uninterrupted run would
(tests/unit/test_lm_training.py). The state carries a fingerprint of the settings, the data and the model; a state
written by another configuration is refused by name (ResumeMismatch), never silently resumed. It is deleted when the run
finishes (after the final model is saved to `checkpoint_dir`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from mwpgen import resume
from mwpgen.batching import seeded_batches
from mwpgen.device import autocast_dtype, needs_grad_scaler
from mwpgen.early_stopping import EarlyStopping
from mwpgen.evaluation.metrics import acc_eq
from mwpgen.lm.decoding import predict_equations
from mwpgen.lm.loading import atomic_save_pretrained
from mwpgen.lm.prompts import IGNORE_INDEX, LMExample, collate, encode_example
from mwpgen.log_window import LogWindow
from mwpgen.resume import Checkpoints
from mwpgen.trainer import StepResult, Trainer, ValidationSchedule

Examples = Sequence[LMExample] | Callable[[int], Sequence[LMExample]]


def lm_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Eq. 3: -log p(m_t | E, c, m_<t) over target positions (labels != -100), averaged per token
    rather than summed so the learning rate does not depend on problem length (reduction="sum": the sum)."""
    shift_logits = logits[:, :-1, :].float()  # position t predicts token t+1
    shift_labels = labels[:, 1:]
    return F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction)


def validation_batches(tokenizer, examples: Sequence[LMExample], batch_size: int,
                       max_length: int) -> list[dict[str, torch.Tensor]]:
    """The validation slice encoded once, in batches of similar length (less padding; the loss is unaffected)."""
    encoded = sorted((encode_example(tokenizer, ex, max_length) for ex in examples), key=lambda e: len(e["input_ids"]))
    return [collate(encoded[i : i + batch_size], tokenizer.pad_token_id) for i in range(0, len(encoded), batch_size)]


@torch.no_grad()
def validation_loss(model: torch.nn.Module, batches: Sequence[dict[str, torch.Tensor]],
                    device: str | torch.device = "cpu", amp_dtype: torch.dtype | None = None) -> float:
    """The training loss on held-out batches, per target token over all of them (eval mode: no dropout)."""
    device = torch.device(device)
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        total += float(lm_loss(logits, batch["labels"], reduction="sum"))
        count += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    model.train(was_training)
    return total / max(count, 1)


def run_fingerprint(settings: dict, examples: Sequence[LMExample], validation: Sequence[LMExample],
                    model: torch.nn.Module, extra: dict | None = None) -> str:
    """What shapes the run (settings, epoch 0's examples, the validation slice, the model's shape and `extra`, e.g.
    the model id): a state is resumed only by the run that wrote it."""
    return resume.fingerprint(settings=settings, data=[(e.prompt, e.target, e.kind) for e in examples],
                              validation=[(e.prompt, e.target, e.kind) for e in validation],
                              model=[type(model).__name__, sum(p.numel() for p in model.parameters())],
                              extra=extra or {})


def train_causal_lm(
    model: torch.nn.Module,
    tokenizer,
    examples: Examples,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    max_length: int,
    seed: int = 0,
    device: str | torch.device = "cpu",
    mixed_precision: bool = True,
    checkpoint_dir: Path | None = None,
    log_every: int = 10,
    on_log: Callable[[dict], None] | None = None,
    max_steps: int,
    grad_accum: int,
    max_grad_norm: float = 1.0,
    validation: Sequence[LMExample] | None = None,
    eval_every: int,
    patience: int,
    on_eval: Callable[[dict], None] | None = None,
    resume_dir: Path | None = None,
    save_every: int,
    fingerprint_extra: dict | None = None,
    on_step: Callable[[int], None] | None = None,
    val_score: Callable[[torch.nn.Module, Any], float] | None = None,
    length_grouped: bool = True,
) -> dict[str, Any]:
    """Fine-tune `model` on `examples` (a list, or `epoch -> list` for fresh keyword dropout per
    epoch). One optimizer step = `grad_accum` micro-batches of `batch_size`.

    `validation` (examples built once, e.g. without keyword dropout): measured before the first step, every
    `eval_every` steps (0: only) at each epoch's end and at the last step, each record {step, epoch, val_loss,
    best_val_loss, best_step} passed to `on_eval`; the best weights are the model returned and saved; `patience`
    evaluations without improvement stop the run (0: never). `resume_dir`: resumable state every `save_every`
    steps (see the module doc). `on_step(step)` is called after each step and its checkpoint (tests raise from it
    to simulate a kill). `val_score(model, tokenizer)`: the checkpoint criterion in place of the loss (module doc);
    its value is in each record as "val_score". `length_grouped`: batches of similar lengths (`seeded_batches`:
    less padding computed); False: the plain seeded order (what the data-parallel sharding reproduces).

    One function read top to bottom (set-up, the step, the validation, the loop, the save), as nanoGPT's train.py:
    its length is its signature and this docstring; the loop's bookkeeping is the Trainer's.
    Returns the Trainer's summary (mwpgen/trainer.py: "steps", "best_step", "best_val_loss", "best_val_score",
    "final_train_loss", "stopped_early", "resumed_from", "history" of per-step "train_loss", "validations" (the
    on_eval records), "log" (the on_log records), "timing" with "tokens_per_s") and "tokens", "checkpoint_dir",
    "precision".
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
    total_steps = min(max_steps, epochs * steps_per_epoch) if max_steps else epochs * steps_per_epoch
    validation = list(validation or [])
    val_batches = validation_batches(tokenizer, validation, batch_size, max_length) if validation else []

    settings = {"epochs": epochs, "batch_size": batch_size, "lr": lr, "max_length": max_length, "seed": seed,
                "grad_accum": grad_accum, "max_grad_norm": max_grad_norm, "total_steps": total_steps,
                "eval_every": eval_every, "patience": patience, "precision": str(amp_dtype), "device": device.type,
                "checkpoint_by": "score" if val_score is not None else "loss", "length_grouped": length_grouped}
    checkpoints = Checkpoints(resume_dir, run_fingerprint(settings, get_examples(0), validation, model,
                                                          fingerprint_extra), save_every)
    log = LogWindow(log_every, total_steps, on_log)
    resumable = {"model": model, "optimizer": optimizer} | ({"scaler": scaler} if scaler is not None else {})
    trainer = Trainer(checkpoints, resumable, log, on_validation=on_eval, on_step=on_step)

    @functools.lru_cache(maxsize=1)  # the current epoch's encoded examples and micro-batches
    def epoch_batches(epoch: int) -> tuple[list, list]:
        encoded = [encode_example(tokenizer, ex, max_length) for ex in get_examples(epoch)]
        lengths = [len(e["input_ids"]) for e in encoded] if length_grouped else None
        return encoded, seeded_batches(len(encoded), batch_size, seed, epoch, lengths)

    def train_step(step: int) -> StepResult:
        epoch, position = divmod(step - 1, steps_per_epoch)
        encoded, micro_batches = epoch_batches(epoch)
        group = micro_batches[position * grad_accum : (position + 1) * grad_accum]
        step_loss = 0.0
        for idx in group:
            batch = {k: v.to(device) for k, v in collate([encoded[i] for i in idx], tokenizer.pad_token_id).items()}
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                loss = lm_loss(logits, batch["labels"])
            scaled = loss / len(group)
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
            step_loss += loss.item() / len(group)
            log.add({"train_loss": loss.item()}, 1, tokens=int(batch["attention_mask"].sum()), examples=len(idx))
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return StepResult({"train_loss": step_loss}, epoch, step % steps_per_epoch == 0 or step == total_steps, lr)

    def validate() -> dict:
        measured = {"val_loss": validation_loss(model, val_batches, device, amp_dtype)}
        if val_score is not None:
            measured["val_score"] = val_score(model, tokenizer)
        return measured

    stopping = EarlyStopping({"model": model}, patience)
    trainer.fit(train_step, validate if val_batches else None, end=total_steps, stopping=stopping,
                schedule=ValidationSchedule(every=eval_every, at_epoch_end=True, at_start=True))
    model.eval()
    if checkpoint_dir is not None:
        atomic_save_pretrained(model, tokenizer, Path(checkpoint_dir))
    checkpoints.remove()
    summary = trainer.summary()
    summary["timing"] |= {"tokens_per_s": log.tokens / max(summary["timing"]["wall_s"], 1e-9)}
    return {**summary, "tokens": log.tokens, "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None,
            "precision": {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[amp_dtype]}


def parse_accuracy(mwp2eq_model, tokenizer, problems: Sequence[str], references: Sequence[str], *,
                   batch_size: int, device: str | torch.device | None = None) -> float:
    """Exact ACC-eq of the parser's greedy parses of `problems`: the evaluator's checkpoint score and the co-trained
    mwp2eq's accuracy as phase 2 starts."""
    return acc_eq(predict_equations(mwp2eq_model, tokenizer, problems, batch_size=batch_size, device=device),
                  references)
