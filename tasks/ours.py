"""Tasks for the paper's method: train ours (selector + generator + co-trained mwp2eq) and generate with it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import OursTrainParams, Params
from mwpgen.ours.build import train_and_save
from mwpgen.ours.bundle import generate_with_context, load_bundle
from mwpgen.ours.steps import JointExample
from mwpgen.paths import FoldPaths
from mwpgen.runtime import resolve_device


@task(cache_policy=NO_CACHE)
def train(params: Params, cfg: OursTrainParams, examples: Callable[[int, int], Sequence[JointExample]],
          paths: FoldPaths, on_log, validation: Sequence[JointExample] = ()) -> dict:
    return train_and_save(cfg, examples, model_id=params.train.model, device=resolve_device(params.train.device),
                      seed=params.experiment.seed, mixed_precision=params.train.mixed_precision,
                      log_every=params.train.log_every, bundle_dir=paths.model_dir, resume_dir=paths.resume_dir,
                      evaluator_dir=paths.evaluator.model_dir, on_log=on_log, validation=validation)


@task(cache_policy=NO_CACHE)
def generate_ours(params: Params, bundle_dir: Path, examples: Sequence[JointExample]) -> tuple[list[str], list[list[str]]]:
    generator, tokenizer, selector, settings = load_bundle(bundle_dir, resolve_device(params.train.device))
    g = params.generate
    return generate_with_context(generator, tokenizer, selector, examples, threshold=settings["threshold"],
                                 max_problem_tokens=settings["max_problem_tokens"], batch_size=g.batch_size,
                                 decoding=g.decoding, num_beams=g.num_beams, top_p=g.top_p,
                                 temperature=g.temperature, max_new_tokens=g.max_new_tokens,
                                 seed=params.experiment.seed)
