"""Building ours from `train.ours` and training it end to end: one code path for the pipeline and the benches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from mwpgen import resume
from mwpgen.config.schema import OursTrainParams
from mwpgen.device import autocast_dtype
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained
from mwpgen.ours.bundle import save_bundle
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.joint_step import JointModels
from mwpgen.ours.selector import ContextSelector, fit_to_keywords, tokenize_words
from mwpgen.ours.training import train_joint


def build_models(cfg: OursTrainParams, model_id: str, *, device: str, seed: int, mixed_precision: bool,
                 evaluator_dir: Path | None = None, cache_dir: Path = DEFAULT_MODEL_CACHE) -> JointModels:
    """Generator (pre-trained `model_id`), the co-trained mwp2eq (only with L_eq: nothing else would use it) and
    the selector (only for context = selector), checked to share one vocabulary (Eq. 4 needs it); trained under
    autocast where `mixed_precision` pays (mwpgen.device.autocast_dtype)."""
    generator, tokenizer = load_model_and_tokenizer(model_id, cache_dir, device=device, seed=seed)
    mwp2eq = mwp2eq_tokenizer = None
    if cfg.equation_loss and cfg.mwp2eq_init == "evaluator":
        if evaluator_dir is None:
            raise ValueError("mwp2eq_init = evaluator needs the fold's evaluator folder")
        mwp2eq, mwp2eq_tokenizer = load_trained(evaluator_dir, device)
    elif cfg.equation_loss:
        mwp2eq, mwp2eq_tokenizer = load_model_and_tokenizer(model_id, cache_dir, device=device)
    # The selector reads the PRE-TRAINED embeddings, copied before any fine-tuning (supplementary).
    torch.manual_seed(seed)  # its w, b initialisation
    q = ContextSelector.from_model(generator, cfg.selector, cfg.rho).to(device) if cfg.context == "selector" else None
    models = JointModels(generator, mwp2eq, tokenizer, q, autocast_dtype(device, mixed_precision))
    models.check(mwp2eq_tokenizer)
    return models


def warm_start_selector(models: JointModels, cfg: OursTrainParams, examples: Sequence[JointExample],
                        keywords: Sequence[Sequence[str]]) -> dict:
    """selector_init = keywords: q fitted to pick each training problem's TF-IDF keywords (selector.fit_to_keywords)
    before phase 1. Returns the fit's statistics."""
    items = [tokenize_words(models.tokenizer, ex.problem, cfg.max_problem_tokens) for ex in examples]
    return fit_to_keywords(models.selector, items, keywords)


def train_and_save(cfg: OursTrainParams, examples: Callable[[int, int], Sequence[JointExample]], *, model_id: str,
                   device: str, seed: int, mixed_precision: bool, log_every: int, bundle_dir: Path, resume_dir: Path,
                   dropout: float, selector_keywords: Sequence[Sequence[str]] | None = None,
                   evaluator_dir: Path | None = None, on_log=None, validation: Sequence[JointExample] = (),
                   mwp2eq_target: float | None = None) -> dict:
    """Build ours, warm-start its selector on `selector_keywords` (each training example's TF-IDF keywords; with
    selector_init = keywords), train both phases (resuming from `resume_dir`; training.py chooses each component's
    checkpoint on `validation`; the co-trained mwp2eq reaches `mwp2eq_target` first, training.py), save the bundle
    (with the co-trained mwp2eq, when there is one, for verified generation); the finished bundle supersedes the resume
    state, which is deleted."""
    models = build_models(cfg, model_id, device=device, seed=seed, mixed_precision=mixed_precision,
                          evaluator_dir=evaluator_dir)
    warm_start = None
    if models.selector is not None and cfg.selector_init == "keywords":
        if selector_keywords is None:
            raise ValueError("selector_init = keywords needs each training problem's keywords (selector_keywords)")
        warm_start = warm_start_selector(models, cfg, examples(1, 0), selector_keywords)
    result = train_joint(models, examples, cfg, seed=seed, log_every=log_every, state_dir=resume_dir,
                         fingerprint_extra={"model": model_id, "device": device, "precision": str(models.amp_dtype),
                                            "mwp2eq_target": mwp2eq_target},
                         on_log=on_log, validation=validation, dropout=dropout, mwp2eq_target=mwp2eq_target)
    save_bundle(bundle_dir, models.generator, models.tokenizer, models.selector,
                {"context": cfg.context, "selector": cfg.selector, "threshold": cfg.threshold,
                 "max_problem_tokens": cfg.max_problem_tokens, "context_tokens": cfg.context_tokens,
                 "train": cfg.model_dump(), "base_model": model_id}, mwp2eq=models.mwp2eq)
    resume.remove(resume_dir)
    return result | {"device": device, "selector_warm_start": warm_start}
