"""Fit the learned consistency judge on readings, choose it on validation ones, and save it: the `train_judge` task."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.judge_training import fit_and_choose
from mwpgen.runtime import autocast_dtype, needs_grad_scaler, resolve_device


@task(cache_policy=NO_CACHE)
def train_judge_model(params: Params, source: str | Path, backbone: str, train: Sequence[dict],
                      validation: Sequence[dict], out_dir: Path,
                      on_log: Callable[[int, int, int, float], None] | None = None) -> dict:
    """The judge over `source` (the evaluator's folder or train.model), saved to `out_dir`; `backbone` says what
    `source` is in the saved judge. Returns how it measured on the validation readings."""
    device = resolve_device(params.train.device)
    autocast = autocast_dtype(device, params.train.mixed_precision)
    if needs_grad_scaler(autocast):  # fp16 needs loss scaling, which the judge's short fine-tuning does without
        autocast = None
    judge, measured = fit_and_choose(source, train, validation, params.judge, device=device, autocast=autocast,
                                     log=on_log)
    judge.info.backbone = backbone
    judge.save(out_dir)
    return measured
