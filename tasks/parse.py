"""The evaluator's equations for problems (greedy): ACC-eq's parses and the oracle's."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.device import resolve_device
from mwpgen.lm import decoding
from mwpgen.lm.loading import load_trained


@task(cache_policy=NO_CACHE)
def predict_equations(params: Params, checkpoint_dir: Path, problems: list[str]) -> list[str]:
    """The evaluator mwp2eq's equation for each problem (greedy)."""
    model, tokenizer = load_trained(checkpoint_dir, resolve_device(params.train.device))
    return decoding.predict_equations(model, tokenizer, problems, batch_size=params.generate.batch_size)
