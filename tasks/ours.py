"""Tasks for the paper's method: train "ours" (selector + generator + co-trained mwp2eq) and generate with it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config import OursTrainParams, Params
from mwpgen.ours.steps import JointConfig, JointExample, JointModels
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.ours.bundle import generate_with_context, load_bundle, save_bundle
from mwpgen.ours.selector import ContextSelector
from mwpgen.ours.training import STATE_FILE, Schedule, train_joint
from tasks.models import load_checkpoint, resolve_device


def joint_config(cfg: OursTrainParams, device: str, mixed_precision: bool) -> JointConfig:
    amp = None
    if mixed_precision and device == "cuda":
        amp = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return JointConfig(alpha=cfg.alpha, beta=cfg.beta, rho=cfg.rho, tau=cfg.tau, relaxation=cfg.relaxation,
                       use_eq_loss=cfg.equation_loss, use_context_loss=cfg.context_loss,
                       context_source="selector" if cfg.context == "selector" else "keywords",
                       max_problem_tokens=cfg.max_problem_tokens, max_length=cfg.max_length, autocast_dtype=amp)


def schedule(cfg: OursTrainParams, seed: int, log_every: int) -> Schedule:
    return Schedule(phase1_epochs=cfg.phase1.epochs, phase1_max_steps=cfg.phase1.max_steps,
                    phase2_epochs=cfg.phase2.epochs, phase2_max_steps=cfg.phase2.max_steps,
                    batch_size=cfg.batch_size, lr=cfg.lr, seed=seed, parser_in_phase1=cfg.parser_in_phase1,
                    save_every=cfg.save_every, log_every=log_every)


@task(cache_policy=NO_CACHE)
def train(params: Params, cfg: OursTrainParams, examples: Callable[[int, int], Sequence[JointExample]],
          bundle_dir: Path, state_dir: Path, evaluator_dir: Path, on_log) -> dict:
    """Load generator (pre-trained), co-trained mwp2eq and selector; train (resuming from state_dir); save."""
    device = resolve_device(params.train.device)
    seed = params.experiment.seed
    generator, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, device=device, seed=seed)
    parser = parser_tokenizer = None  # without L_eq nothing would use a co-trained mwp2eq: do not train one
    if cfg.equation_loss and cfg.parser_init == "evaluator":
        parser, parser_tokenizer = load_checkpoint(evaluator_dir, device)
    elif cfg.equation_loss:
        parser, parser_tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, device=device)
    # The selector reads the PRE-TRAINED embeddings, copied before any fine-tuning (supplementary).
    torch.manual_seed(seed)  # its w, b initialisation
    selector = ContextSelector.from_model(generator).to(device) if cfg.context == "selector" else None
    models = JointModels(generator, parser, tokenizer, selector)
    models.check(parser_tokenizer)  # Eq. 4 multiplies generator soft tokens into mwp2eq's embeddings
    config = joint_config(cfg, device, params.train.mixed_precision)
    result = train_joint(models, examples, config, schedule(cfg, seed, params.train.log_every), state_dir=state_dir,
                         fingerprint_extra={"model": params.train.model, "parser_init": cfg.parser_init,
                                            "device": device},
                         on_log=on_log)
    save_bundle(bundle_dir, generator, tokenizer, selector,
                {"context": cfg.context, "threshold": cfg.threshold, "max_problem_tokens": cfg.max_problem_tokens,
                 "train": cfg.model_dump(), "base_model": params.train.model})
    (Path(state_dir) / STATE_FILE).unlink(missing_ok=True)  # the finished bundle supersedes the resume state
    return result | {"device": device}


@task(cache_policy=NO_CACHE)
def generate(params: Params, bundle_dir: Path, examples: Sequence[JointExample]) -> tuple[list[str], list[list[str]]]:
    generator, tokenizer, selector, settings = load_bundle(bundle_dir, resolve_device(params.train.device))
    g = params.generate
    return generate_with_context(generator, tokenizer, selector, examples, threshold=settings["threshold"],
                                 max_problem_tokens=settings["max_problem_tokens"], batch_size=g.batch_size,
                                 decoding=g.decoding, num_beams=g.num_beams, top_p=g.top_p,
                                 temperature=g.temperature, max_new_tokens=g.max_new_tokens,
                                 seed=params.experiment.seed)
