"""Causal-LM tasks: fine-tune, generate, and the evaluator's equations — each a thin call into `mwpgen`."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import LMTrainParams, Params
from mwpgen.lm import decoding
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained
from mwpgen.lm.training import train_causal_lm
from mwpgen.runtime import resolve_device


@task(cache_policy=NO_CACHE)
def fine_tune(params: Params, cfg: LMTrainParams, pretrained: bool, examples, checkpoint_dir: Path, on_log,
              validation=None, resume_dir: Path | None = None, on_eval=None, val_score=None) -> dict:
    """Fine-tune `params.train.model` (pre-trained, or the same architecture randomly initialised): to the lowest
    loss on `validation` (or the best `val_score(model, tokenizer)`) with early stopping, resumable from
    `resume_dir` after a kill."""
    device = resolve_device(params.train.device)
    model, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, pretrained=pretrained,
                                                device=device, seed=params.experiment.seed)
    return train_causal_lm(
        model, tokenizer, examples, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
        max_length=cfg.max_length, seed=params.experiment.seed, device=device,
        mixed_precision=params.train.mixed_precision, checkpoint_dir=checkpoint_dir,
        log_every=params.train.log_every, on_log=on_log, max_steps=cfg.max_steps or None, grad_accum=cfg.grad_accum,
        validation=validation, eval_every=cfg.eval_every, patience=cfg.patience, on_eval=on_eval,
        resume_dir=resume_dir, save_every=cfg.save_every, val_score=val_score,
        fingerprint_extra={"model": params.train.model, "pretrained": pretrained})


@task(cache_policy=NO_CACHE)
def generate_lm(params: Params, checkpoint_dir: Path, prompts: list[str]) -> list[str]:
    model, tokenizer = load_trained(checkpoint_dir, resolve_device(params.train.device))
    g = params.generate
    return decoding.generate_texts(model, tokenizer, prompts, batch_size=g.batch_size, decoding=g.decoding,
                                      num_beams=g.num_beams, top_p=g.top_p, temperature=g.temperature,
                                      max_new_tokens=g.max_new_tokens, seed=params.experiment.seed)


@task(cache_policy=NO_CACHE)
def predict_equations(params: Params, checkpoint_dir: Path, problems: list[str]) -> list[str]:
    """The evaluator mwp2eq's equation for each problem (greedy)."""
    model, tokenizer = load_trained(checkpoint_dir, resolve_device(params.train.device))
    return decoding.predict_equations(model, tokenizer, problems, batch_size=params.generate.batch_size)
