"""Building ours from `train.ours` and training it end to end: one code path for the pipeline and the benches."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch

from mwpgen import resume
from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained
from mwpgen.ours.bundle import save_bundle
from mwpgen.ours.selector import ContextSelector
from mwpgen.ours.steps import JointConfig, JointExample, JointModels
from mwpgen.ours.training import Schedule, train_joint
from mwpgen.runtime import autocast_dtype


def joint_config(cfg: OursTrainParams, device: str, mixed_precision: bool) -> JointConfig:
    return JointConfig(alpha=cfg.alpha, beta=cfg.beta, rho=cfg.rho, tau=cfg.tau, relaxation=cfg.relaxation,
                       use_eq_loss=cfg.equation_loss, use_context_loss=cfg.context_loss,
                       context_source="selector" if cfg.context == "selector" else "keywords",
                       max_problem_tokens=cfg.max_problem_tokens, max_length=cfg.max_length,
                       mwp2eq_on_generated=cfg.mwp2eq_phase2 == "generated",
                       mwp2eq_on_real=cfg.mwp2eq_phase2 == "real",
                       autocast_dtype=autocast_dtype(device, mixed_precision))


def schedule(cfg: OursTrainParams, seed: int, log_every: int) -> Schedule:
    return Schedule(phase1_epochs=cfg.phase1.epochs, phase1_max_steps=cfg.phase1.max_steps,
                    phase2_epochs=cfg.phase2.epochs, phase2_max_steps=cfg.phase2.max_steps,
                    batch_size=cfg.batch_size, lr=cfg.lr, selector_lr=cfg.selector_lr or cfg.lr, seed=seed,
                    mwp2eq_in_phase1=cfg.mwp2eq_in_phase1, save_every=cfg.save_every, log_every=log_every,
                    eval_every=cfg.eval_every, patience=cfg.patience, threshold=cfg.threshold)


def build_models(model_id: str, *, context: str, equation_loss: bool, mwp2eq_init: str, device: str, seed: int,
                 selector: str = "eq5", rho: float | None = None, evaluator_dir: Path | None = None,
                 cache_dir: Path = DEFAULT_MODEL_CACHE) -> JointModels:
    """Generator (pre-trained `model_id`), the co-trained mwp2eq (only with L_eq: nothing else would use it) and
    the selector (only for context = selector), checked to share one vocabulary (Eq. 4 needs it)."""
    generator, tokenizer = load_model_and_tokenizer(model_id, cache_dir, device=device, seed=seed)
    mwp2eq = mwp2eq_tokenizer = None
    if equation_loss and mwp2eq_init == "evaluator":
        if evaluator_dir is None:
            raise ValueError("mwp2eq_init = evaluator needs the fold's evaluator folder")
        mwp2eq, mwp2eq_tokenizer = load_trained(evaluator_dir, device)
    elif equation_loss:
        mwp2eq, mwp2eq_tokenizer = load_model_and_tokenizer(model_id, cache_dir, device=device)
    # The selector reads the PRE-TRAINED embeddings, copied before any fine-tuning (supplementary).
    torch.manual_seed(seed)  # its w, b initialisation
    q = ContextSelector.from_model(generator, selector, rho).to(device) if context == "selector" else None
    models = JointModels(generator, mwp2eq, tokenizer, q)
    models.check(mwp2eq_tokenizer)
    return models


def train_and_save(cfg: OursTrainParams, examples: Callable[[int, int], Sequence[JointExample]], *, model_id: str,
               device: str, seed: int, mixed_precision: bool, log_every: int, bundle_dir: Path, resume_dir: Path,
               evaluator_dir: Path | None = None, on_log=None, validation: Sequence[JointExample] = ()) -> dict:
    """Build ours, train both phases (resuming from `resume_dir`; each phase keeps its weights of lowest loss on
    `validation`), save the bundle (with the co-trained mwp2eq, when there is one, for verified generation); the
    finished bundle supersedes the resume state, which is deleted."""
    models = build_models(model_id, context=cfg.context, equation_loss=cfg.equation_loss,
                          mwp2eq_init=cfg.mwp2eq_init, device=device, seed=seed, selector=cfg.selector,
                          rho=cfg.rho, evaluator_dir=evaluator_dir)
    result = train_joint(models, examples, joint_config(cfg, device, mixed_precision),
                         schedule(cfg, seed, log_every), state_dir=resume_dir,
                         fingerprint_extra={"model": model_id, "mwp2eq_init": cfg.mwp2eq_init, "device": device},
                         on_log=on_log, validation=validation)
    save_bundle(bundle_dir, models.generator, models.tokenizer, models.selector,
                {"context": cfg.context, "selector": cfg.selector, "threshold": cfg.threshold,
                 "max_problem_tokens": cfg.max_problem_tokens,
                 "train": cfg.model_dump(), "base_model": model_id}, mwp2eq=models.mwp2eq)
    resume.remove(resume_dir)
    return result | {"device": device}
