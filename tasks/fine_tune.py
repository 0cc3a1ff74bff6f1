"""Fine-tune a causal LM (GPT, GPT-pre, the evaluator): the `train_generator` and `train_evaluator` stages' task."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import LMTrainParams, Params
from mwpgen.device import resolve_device
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.training import train_causal_lm


@task(cache_policy=NO_CACHE)
def fine_tune(params: Params, cfg: LMTrainParams, pretrained: bool, examples, checkpoint_dir: Path, on_log,
              validation=None, resume_dir: Path | None = None, on_eval=None, val_score=None,
              data_parallel: bool = False) -> dict:
    """Fine-tune `params.train.model` (pre-trained, or the same architecture randomly initialised): to the lowest
    loss on `validation` (or the best `val_score(model, tokenizer)`) with early stopping, resumable from
    `resume_dir` after a kill. `data_parallel`: this process is one rank of a torchrun launch
    (mwpgen/lm/distributed.py; flows/train_distributed.py)."""
    device = resolve_device(params.train.device)
    model, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, pretrained=pretrained,
                                                device=device, seed=params.experiment.seed)
    trainer = train_causal_lm
    if data_parallel:
        from mwpgen.lm.distributed import train_causal_lm_distributed as trainer
    return trainer(
        model, tokenizer, examples, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
        max_length=cfg.max_length, seed=params.experiment.seed, device=device,
        mixed_precision=params.train.mixed_precision, checkpoint_dir=checkpoint_dir,
        log_every=params.train.log_every, on_log=on_log, max_steps=cfg.max_steps, grad_accum=cfg.grad_accum,
        validation=validation, eval_every=cfg.eval_every, patience=cfg.patience, on_eval=on_eval,
        resume_dir=resume_dir, save_every=cfg.save_every, val_score=val_score,
        fingerprint_extra={"model": params.train.model, "pretrained": pretrained})
