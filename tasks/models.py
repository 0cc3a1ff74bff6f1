"""Model tasks: load, fine-tune, generate, parse — each a thin call into `mwpgen`."""

from __future__ import annotations

from pathlib import Path

import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config import Params
from mwpgen.lm.decoding import generate_problems, parse_equations
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.training import train_causal_lm


def resolve_device(device: str) -> str:
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device = cuda, but no CUDA device is visible; use auto or cpu")
    return "cuda" if device == "auto" and torch.cuda.is_available() else ("cpu" if device == "auto" else device)


def load_checkpoint(path: Path, device: str):
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no trained model at {path}; run its train stage first (dvc repro)")
    return load_model_and_tokenizer(str(path), DEFAULT_MODEL_CACHE, pretrained=True, device=device)


@task(cache_policy=NO_CACHE)
def fine_tune(params: Params, kind: str, pretrained: bool, examples, checkpoint_dir: Path, on_log) -> dict:
    """Fine-tune `params.train.model` (pre-trained, or the same architecture randomly initialised)."""
    device = resolve_device(params.train.device)
    cfg = params.train.generator if kind == "generator" else params.train.parser
    model, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, pretrained=pretrained,
                                                device=device, seed=params.experiment.seed)
    return train_causal_lm(
        model, tokenizer, examples, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
        max_length=cfg.max_length, seed=params.experiment.seed, device=device,
        mixed_precision=params.train.mixed_precision, checkpoint_dir=checkpoint_dir,
        log_every=params.train.log_every, on_log=on_log, max_steps=cfg.max_steps or None, grad_accum=cfg.grad_accum)


@task(cache_policy=NO_CACHE)
def generate(params: Params, checkpoint_dir: Path, prompts: list[str]) -> list[str]:
    model, tokenizer = load_checkpoint(checkpoint_dir, resolve_device(params.train.device))
    g = params.generate
    return generate_problems(model, tokenizer, prompts, batch_size=g.batch_size, decoding=g.decoding,
                             num_beams=g.num_beams, top_p=g.top_p, temperature=g.temperature,
                             max_new_tokens=g.max_new_tokens, seed=params.experiment.seed)


@task(cache_policy=NO_CACHE)
def parse(params: Params, checkpoint_dir: Path, problems: list[str]) -> list[str]:
    """The evaluator mwp2eq's equation for each problem (greedy)."""
    model, tokenizer = load_checkpoint(checkpoint_dir, resolve_device(params.train.device))
    return parse_equations(model, tokenizer, problems, batch_size=params.generate.batch_size)
