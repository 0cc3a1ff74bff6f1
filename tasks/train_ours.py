"""Train the paper's method (selector + generator + co-trained mwp2eq) and save its bundle: the `train_ours` task."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import OursTrainParams, Params
from mwpgen.device import resolve_device
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.train_and_save import train_and_save
from mwpgen.paths import FoldPaths


@task(cache_policy=NO_CACHE)
def train_ours_bundle(params: Params, cfg: OursTrainParams, examples: Callable[[int, int], Sequence[JointExample]],
                      paths: FoldPaths, on_log, validation: Sequence[JointExample] = (),
                      selector_keywords: Sequence[Sequence[str]] | None = None,
                      mwp2eq_target: float | None = None) -> dict:
    return train_and_save(cfg, examples, model_id=params.train.model, device=resolve_device(params.train.device),
                          seed=params.experiment.seed, mixed_precision=params.train.mixed_precision,
                          log_every=params.train.log_every, bundle_dir=paths.model_dir, resume_dir=paths.resume_dir,
                          dropout=params.keywords.dropout, selector_keywords=selector_keywords,
                          evaluator_dir=paths.evaluator.model_dir, on_log=on_log, validation=validation,
                          mwp2eq_target=mwp2eq_target)
