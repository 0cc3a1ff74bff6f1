"""Training loop, data preparation and checkpoints for the seq2seq baselines.

Paper settings (supplementary Table "Model configurations"; the paper trained with OpenNMT-py, whose
defaults fill in what the table leaves out):
- seq2seq-rnn: Adagrad lr 0.15 (initial accumulator 0.1, as OpenNMT's recipe that uses
  Adagrad 0.15), batch 64 examples, gradient norm clipped at 5, loss summed over tokens and divided by the
  number of sentences (OpenNMT -normalization sents), dropout 0.3.
- seq2seq-transformer: Adam (betas 0.9/0.998, eps 1e-9) with the Noam schedule, factor 2, warm-up 8000
  (OpenNMT's transformer recipe), batches of ~4,096 tokens, label smoothing 0.1, loss per token, no clipping.
- 5,000 steps (15,000 for Math23K). Training examples get fresh keyword dropout (p 0.3 + permutation) every
  epoch (supplementary "Training Details").

A checkpoint is a folder: model.safetensors (state dict), config.json (model constructor arguments + training
summary), src_vocab.json, tgt_vocab.json; written into a temp folder beside it, then renamed into place.
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from mwpgen import resume
from mwpgen.data.keywords import KEYWORD_DROPOUT, keywords_per_epoch
from mwpgen.early_stopping import EarlyStopping
from mwpgen.log_window import LogWindow
from mwpgen.resume import Checkpoints
from mwpgen.trainer import Notes, StepResult, Trainer, ValidationSchedule

from .checkpoint import save_checkpoint
from .decode import pad_batch
from .transformer import noam_scheduler
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab, source_tokens, target_tokens

Example = tuple[list[int], list[int]]  # (source ids, target ids), no <bos>/<eos>
Examples = Sequence[Example] | Callable[[int], Sequence[Example]]

MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # 2-layer LSTM with attention: the paper's "seq2seq-rnn" (see rnn.py on why attention is on).
    "seq2seq-rnn": {"kind": "rnn", "emb_dim": 300, "hidden": 512, "layers": 2, "attention": "general",
                    "dropout": 0.3},
    "seq2seq-transformer": {"kind": "transformer", "d_model": 512, "heads": 8, "layers": 6, "ff": 2048,
                            "dropout": 0.1},
}
_RNN_TRAIN = {"optimizer": "adagrad", "lr": 0.15, "adagrad_init": 0.1, "batch_size": 64, "batch_type": "examples",
              "max_grad_norm": 5.0, "label_smoothing": 0.0, "normalization": "sents"}
TRAIN_PRESETS: dict[str, dict[str, Any]] = {
    "seq2seq-rnn": dict(_RNN_TRAIN),
    "seq2seq-transformer": {"optimizer": "noam", "lr": 2.0, "warmup_steps": 8000, "batch_size": 4096,
                            "batch_type": "tokens", "max_grad_norm": 0.0, "label_smoothing": 0.1,
                            "normalization": "tokens"},
}


def paper_steps(dataset: str) -> int:
    """Training steps of the table: 15,000 for Math23K, 5,000 otherwise."""
    return 15000 if dataset == "math23k" else 5000


# ---------------------------------------------------------------- data

def encode_example(src_vocab: Vocab, tgt_vocab: Vocab, equation: str, keywords: Sequence[str], text: str) -> Example:
    return src_vocab.encode(source_tokens(equation, keywords)), tgt_vocab.encode(target_tokens(text))


def training_epochs(records: Sequence[Mapping[str, str]], keywords: Mapping[str, Sequence[str]], src_vocab: Vocab,
                    tgt_vocab: Vocab, *, p: float = KEYWORD_DROPOUT, seed: int = 0) -> Callable[[int], list[Example]]:
    """`epoch -> examples` with fresh keyword dropout per epoch, reproducible from (seed, epoch)."""

    keywords_of = keywords_per_epoch(records, keywords, p, seed)

    def for_epoch(epoch: int) -> list[Example]:
        return [encode_example(src_vocab, tgt_vocab, r["equation"], kws, r["text"])
                for r, kws in zip(records, keywords_of(epoch))]

    return for_epoch


def make_batches(examples: Sequence[Example], *, batch_size: int, batch_type: str,
                 rng: random.Random) -> list[list[int]]:
    """Index batches for one epoch.

    "examples": shuffled, `batch_size` examples each. "tokens": like OpenNMT's token batching, examples are
    shuffled, sorted by length within pools (less padding), packed while n_examples * longest side (source, or
    target + 1 for <bos>/<eos>) stays within `batch_size` padded tokens, and the batches shuffled.
    """
    order = list(range(len(examples)))
    rng.shuffle(order)
    if batch_type == "examples":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if batch_type != "tokens":
        raise ValueError(f"batch_type must be 'examples' or 'tokens', got {batch_type!r}")

    def size(i: int) -> int:
        src, tgt = examples[i]
        return max(len(src), len(tgt) + 1)

    batches: list[list[int]] = []
    pool = 128 * max(1, batch_size // 32)  # ~ a few dozen batches per pool
    for start in range(0, len(order), pool):
        current: list[int] = []
        longest = 0
        for i in sorted(order[start : start + pool], key=size):
            longest_if_added = max(longest, size(i))
            if current and (len(current) + 1) * longest_if_added > batch_size:
                batches.append(current)
                current, longest_if_added = [], size(i)
            current.append(i)
            longest = longest_if_added
        if current:
            batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(batch: Sequence[Example],
            device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src (B, S), tgt_in = <bos> + target, tgt_out = target + <eos>), right-padded with <pad>."""
    src = pad_batch([s for s, _ in batch], device)
    tgt_in = pad_batch([[BOS_ID, *t] for _, t in batch], device)
    tgt_out = pad_batch([[*t, EOS_ID] for _, t in batch], device)
    return src, tgt_in, tgt_out


def seq2seq_loss(logits: torch.Tensor, tgt_out: torch.Tensor, *,
                 label_smoothing: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(training loss summed over target tokens, plain NLL summed, number of target tokens); <pad> ignored.
    Label smoothing as torch's cross_entropy: (1 - eps) * NLL + eps * mean over the vocabulary of -log p."""
    logp = torch.log_softmax(logits.float(), -1)
    mask = tgt_out != PAD_ID
    nll = -logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    nll_sum = nll.masked_select(mask).sum()
    if label_smoothing > 0:
        smooth = -logp.mean(-1)
        loss = (1 - label_smoothing) * nll_sum + label_smoothing * smooth.masked_select(mask).sum()
    else:
        loss = nll_sum
    return loss, nll_sum.detach(), int(mask.sum())


# ---------------------------------------------------------------- training

def _optimizer(model: torch.nn.Module, name: str, lr: float, *, warmup_steps: int, adagrad_init: float):
    params = [p for p in model.parameters() if p.requires_grad]
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=adagrad_init), None
    if name == "noam":
        opt = torch.optim.Adam(params, lr=1.0, betas=(0.9, 0.998), eps=1e-9)
        d_model = model.config.get("d_model") or model.config.get("hidden")
        return opt, noam_scheduler(opt, d_model=d_model, warmup=warmup_steps, factor=lr)
    raise ValueError(f"optimizer must be 'adagrad' or 'noam', got {name!r}")


def train_seq2seq(
    model: torch.nn.Module,
    examples: Examples,
    *,
    steps: int,
    optimizer: str = "adagrad",
    lr: float,
    batch_size: int,
    batch_type: str = "examples",
    warmup_steps: int = 8000,
    adagrad_init: float = 0.1,
    max_grad_norm: float = 5.0,
    label_smoothing: float = 0.0,
    normalization: str = "sents",
    seed: int = 0,
    device: str | torch.device = "cpu",
    log_every: int = 50,
    on_log: Callable[[dict], None] | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    vocabs: tuple[Vocab, Vocab] | None = None,
    validation: Sequence[Example] = (),
    eval_every: int,
    patience: int,
    resume_dir: str | os.PathLike | None = None,
    save_every: int,
    fingerprint_extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Train for `steps` optimizer steps (epochs restart as needed; `examples` may be `epoch -> examples` for
    fresh keyword dropout). optimizer: "adagrad" (lr = learning rate) or "noam" (Adam + Noam, lr = the factor).
    batch_type "examples" | "tokens" (batch_size = padded tokens). normalization:
    "sents" (loss sum / batch size, OpenNMT's RNN default) or "tokens" (per target token).
    If `checkpoint_dir` is given, `vocabs` = (src_vocab, tgt_vocab) must be too; the checkpoint is written at
    the end.
    With `validation` examples, the NLL per target token on them is measured every `eval_every` steps (0: at each
    epoch's end) and at the last step; the weights with the lowest one are the ones kept, and training stops after
    `patience` measurements without a new best (0: never early). With `resume_dir`, the full training state is
    written there every `save_every` steps and a killed run resumes from it (mwpgen/resume.py).
    One function read top to bottom (set-up, the step, the loop, the save), as nanoGPT's train.py: its length is
    its signature and this docstring; the loop's bookkeeping is the Trainer's.
    Returns the Trainer's summary (mwpgen/trainer.py: "steps", "best_step", "best_val_loss", "final_train_loss",
    "stopped_early", "history" of per-step "train_loss" (NLL per target token), "validations", "log", "timing" with
    "tokens_per_s"), the settings, "epochs", "tokens" and "checkpoint_dir"."""
    if checkpoint_dir is not None and vocabs is None:
        raise ValueError("saving a checkpoint needs vocabs=(src_vocab, tgt_vocab)")
    if normalization not in ("sents", "tokens"):
        raise ValueError(f"normalization must be 'sents' or 'tokens', got {normalization!r}")
    device = torch.device(device)
    torch.manual_seed(seed)  # dropout masks
    rng = random.Random(seed)  # batch order: one stream over the epochs, its state kept at each epoch's start
    model.to(device).train()
    opt, scheduler = _optimizer(model, optimizer, lr, warmup_steps=warmup_steps, adagrad_init=adagrad_init)
    get_examples = examples if callable(examples) else (lambda _epoch: examples)

    fp = resume.fingerprint(steps=steps, optimizer=optimizer, lr=lr, batch_size=batch_size, batch_type=batch_type,
                            warmup_steps=warmup_steps, label_smoothing=label_smoothing, seed=seed,
                            config=getattr(model, "config", None), eval_every=eval_every, patience=patience,
                            data=list(get_examples(0)), validation=list(validation), extra=fingerprint_extra)
    checkpoints = Checkpoints(resume_dir, fp, save_every)
    log = LogWindow(log_every, steps, on_log)
    # The data position: the epoch, the batch within it, and the batch order's RNG at the epoch's start.
    cursor = Notes(epoch=0, position=0, epoch_rng=rng.getstate())
    resumable = {"model": model, "optimizer": opt, "cursor": cursor} | (
        {"scheduler": scheduler} if scheduler is not None else {})
    trainer = Trainer(checkpoints, resumable, log)

    @functools.lru_cache(maxsize=1)  # the current epoch's examples and batches
    def epoch_batches(epoch: int) -> tuple[Sequence[Example], list[list[int]]]:
        data = get_examples(epoch)
        if not data:
            raise ValueError("no training examples")
        rng.setstate(cursor["epoch_rng"])
        return data, make_batches(data, batch_size=batch_size, batch_type=batch_type, rng=rng)

    def train_step(step: int) -> StepResult:
        epoch = cursor["epoch"]
        data, batches = epoch_batches(epoch)
        idx = batches[cursor["position"]]
        src, tgt_in, tgt_out = collate([data[i] for i in idx], device)
        loss, nll, n_tok = seq2seq_loss(model(src, tgt_in), tgt_out, label_smoothing=label_smoothing)
        (loss / (len(idx) if normalization == "sents" else max(1, n_tok))).backward()
        if max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        lr_now = opt.param_groups[0]["lr"]  # the rate this step used
        if scheduler is not None:
            scheduler.step()
        nll_value = nll.item()
        log.add({"train_loss": nll_value}, n_tok, tokens=n_tok, examples=len(idx))  # NLL per target token
        cursor["position"] += 1
        epoch_ended = cursor["position"] == len(batches)
        if epoch_ended:
            cursor.update(epoch=epoch + 1, position=0, epoch_rng=rng.getstate())
        return StepResult({"train_loss": nll_value / max(1, n_tok)}, epoch, epoch_ended, lr_now)

    stopping = EarlyStopping({"model": model}, patience)
    trainer.fit(train_step, (lambda: {"val_loss": validation_nll(model, validation, device)}) if validation else None,
                end=steps, stopping=stopping,
                schedule=ValidationSchedule(every=eval_every, at_epoch_end=not eval_every, at_start=False))
    model.eval()
    result = trainer.summary()
    # Epochs completed before the last one: an epoch that ended on the run's last step is not counted.
    epochs = cursor["epoch"] - (1 if cursor["position"] == 0 and result["steps"] > 0 else 0)
    result["timing"] |= {"tokens_per_s": log.tokens / max(result["timing"]["wall_s"], 1e-9)}
    result |= {"epochs": epochs, "tokens": log.tokens, "optimizer": optimizer, "lr": lr, "batch_size": batch_size,
               "batch_type": batch_type, "warmup_steps": warmup_steps if optimizer == "noam" else None,
               "max_grad_norm": max_grad_norm, "label_smoothing": label_smoothing, "normalization": normalization,
               "seed": seed}
    if checkpoint_dir is not None:
        save_checkpoint(checkpoint_dir, model, *vocabs, training=checkpoint_summary(result, stopping))
    checkpoints.remove()
    return result | {"checkpoint_dir": str(checkpoint_dir) if checkpoint_dir is not None else None}


def checkpoint_summary(result: dict, stopping: EarlyStopping) -> dict:
    """The training summary a checkpoint's config.json keeps, in the layout checkpoints have always had (its names
    and order), without the wall time: a model folder is compared byte for byte across runs (its md5 in dvc.lock),
    and the time is the training's timing file's (timing/metrics/train/...)."""
    val = [(v["step"], v["val_loss"]) for v in result["validations"]]
    return {"steps": result["steps"], "epochs": result["epochs"], "tokens": result["tokens"],
            **{k: result[k] for k in ("optimizer", "lr", "batch_size", "batch_type", "warmup_steps", "max_grad_norm",
                                      "label_smoothing", "normalization", "seed")},
            "final_loss": result["final_train_loss"], "val": val, "best_step": stopping.best_step,
            "best_val_loss": stopping.best_loss if val else None, "stopped_early": stopping.out_of_patience}


@torch.no_grad()
def validation_nll(model: torch.nn.Module, examples: Sequence[Example], device, batch_size: int = 64) -> float:
    """Teacher-forced NLL per target token (no label smoothing, no dropout) over `examples`."""
    was_training = model.training
    model.eval()
    nll_sum, n = 0.0, 0
    for start in range(0, len(examples), batch_size):
        src, tgt_in, tgt_out = collate(examples[start : start + batch_size], device)
        _, nll, n_tok = seq2seq_loss(model(src, tgt_in), tgt_out)
        nll_sum, n = nll_sum + float(nll), n + n_tok
    model.train(was_training)
    return nll_sum / max(n, 1)


