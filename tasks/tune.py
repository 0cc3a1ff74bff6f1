"""Tune a trained ours' generator on blind readings and save it as a bundle of its own: the `tune` stage's task."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen import resume, tuning
from mwpgen.config.schema import Params
from mwpgen.device import autocast_dtype, resolve_device
from mwpgen.ours.bundle import load_bundle, load_mwp2eq, save_bundle, select_context
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.paths import PROJECT_ROOT


def selected_examples(tokenizer, selector, records: Sequence[dict], settings: dict) -> list[JointExample]:
    """The fold's training problems with the context ours' selector picks from each at inference (threshold), so
    an RFT mix trains the slot as generation fills it; an empty context where the bundle has no selector."""
    examples = [JointExample(r["equation"], r["text"], ()) for r in records]
    if selector is None:
        return examples
    out = []
    for start in range(0, len(examples), 64):
        chunk = examples[start : start + 64]
        encoded = [encode_joint(tokenizer, ex, settings["max_problem_tokens"]) for ex in chunk]
        _, words = select_context(selector, encoded, settings["threshold"])
        out += [JointExample(ex.equation, ex.problem, tuple(w)) for ex, w in zip(chunk, words)]
    return out


def _relative(path: Path) -> str:
    """The base bundle as the project names it (an absolute path would differ on every clone, and ours.json is a
    tracked output)."""
    path = Path(path).resolve()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


@task(cache_policy=NO_CACHE)
def tune_ours_bundle(params: Params, method: str, base_dir: Path, out_dir: Path, readings: Sequence[dict],
                     train_records: Sequence[dict], resume_dir: Path | None = None, on_log=None) -> dict:
    """Load ours from `base_dir`, tune its generator by `method` on `readings` (corpus_candidates rows), resumable
    from `resume_dir` after a kill, save the bundle (selector and co-trained mwp2eq as they were) to `out_dir` and
    delete the resumable state. Returns the tuning's result and data sizes."""
    cfg, seed = params.tuning, params.experiment.seed
    device = resolve_device(params.train.device)
    generator, tokenizer, selector, settings = load_bundle(base_dir, device)
    readings = tuning.unique_candidates(readings)
    if method == "rft":
        training = selected_examples(tokenizer, selector, train_records, settings)
        data = tuning.rft_examples(readings, training, cfg.rft_mix, seed)
        right = sum(int(r["label"]) for r in readings)
        sizes = {"right_candidates": right, "mixed_in": len(data) - right}
    else:
        data = tuning.preference_pairs(readings, cfg.pairs_per_group, seed)
        sizes = {"pairs": len(data)}
    result = tuning.tune_generator(
        generator, tokenizer, method, data, epochs=cfg.epochs, max_steps=cfg.max_steps, batch_size=cfg.batch_size,
        lr=cfg.lr, beta=cfg.beta, seed=seed, width=settings["context_tokens"],
        max_problem_tokens=settings["max_problem_tokens"],
        autocast_dtype=autocast_dtype(device, params.train.mixed_precision), log_every=params.train.log_every,
        on_log=on_log, resume_dir=resume_dir, save_every=params.train.ours.save_every,  # the generator ours trained
        fingerprint_extra={"base": _relative(base_dir), "device": device})
    kept = {k: v for k, v in settings.items() if k != "format"}
    save_bundle(out_dir, generator, tokenizer, selector,
                kept | {"tuned": {"method": method, "from": _relative(base_dir), **cfg.model_dump(), **sizes}},
                mwp2eq=load_mwp2eq(base_dir, device))
    resume.remove(resume_dir)  # the saved bundle supersedes it
    return {**result, **sizes, "readings": len(readings), "device": device}
