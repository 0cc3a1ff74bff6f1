"""Problems from a trained generator, one task per family: causal LM, ours (with its selector's context), seq2seq."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.device import resolve_device
from mwpgen.lm import decoding
from mwpgen.lm.loading import load_trained
from mwpgen.ours.bundle import generate_with_context, load_bundle
from mwpgen.ours.inputs import JointExample
from mwpgen.seq2seq.decode import generate_baseline


@task(cache_policy=NO_CACHE)
def generate_lm(params: Params, checkpoint_dir: Path, prompts: list[str]) -> list[str]:
    model, tokenizer = load_trained(checkpoint_dir, resolve_device(params.train.device))
    g = params.generate
    return decoding.generate_texts(model, tokenizer, prompts, batch_size=g.batch_size, decoding=g.decoding,
                                      num_beams=g.num_beams, top_p=g.top_p, temperature=g.temperature,
                                      max_new_tokens=g.max_new_tokens, seed=params.experiment.seed)


@task(cache_policy=NO_CACHE)
def generate_ours(
    params: Params, bundle_dir: Path, examples: Sequence[JointExample]
) -> tuple[list[str], list[list[str]]]:
    generator, tokenizer, selector, settings = load_bundle(bundle_dir, resolve_device(params.train.device))
    g = params.generate
    return generate_with_context(generator, tokenizer, selector, examples, width=settings["context_tokens"],
                                 threshold=settings["threshold"],
                                 max_problem_tokens=settings["max_problem_tokens"], batch_size=g.batch_size,
                                 decoding=g.decoding, num_beams=g.num_beams, top_p=g.top_p,
                                 temperature=g.temperature, max_new_tokens=g.max_new_tokens,
                                 seed=params.experiment.seed)


@task(cache_policy=NO_CACHE)
def generate_seq2seq(params: Params, checkpoint_dir: Path, equations: Sequence[str],
                     keywords_lists: Sequence[Sequence[str]]) -> list[str]:
    """Problem texts from a trained seq2seq baseline, decoded as `params.train.seq2seq` says."""
    cfg = params.train.seq2seq
    return generate_baseline(checkpoint_dir, equations, keywords_lists, cfg.decoding, cfg.num_beams, cfg.max_len,
                             resolve_device(params.train.device))
