"""Fit the learned consistency judge on readings, choose it on validation ones, and adopt it only where it judges
validation better than the rule: the `train_judge` task."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.device import autocast_dtype, needs_grad_scaler, resolve_device
from mwpgen.judge.choose import against_the_rule, fit_and_choose
from mwpgen.judge.saved import save_no_judge
from mwpgen.judge.verified import MIN_ACCEPTED, PRECISION_TARGET, choose_verified


@task(cache_policy=NO_CACHE)
def train_judge_model(params: Params, source: str | Path, backbone: str, train: Sequence[dict],
                      validation: Sequence[dict], rule: Sequence[bool], out_dir: Path,
                      on_log: Callable[[int, int, int, float], None] | None = None) -> dict:
    """The judge over `source` (the evaluator's folder or train.model), fitted and chosen; `backbone` says what
    `source` is in the saved judge. `rule`: the rule's verdict on each validation reading. Saved to `out_dir` when
    it judges validation better than the rule (choose.against_the_rule), else `out_dir` says why
    (no_judge.json, with the figures), with the thresholds "verified: yes" is held to (mwpgen/judge/verified.py).
    Returns how it measured on the validation readings, beside the rule."""
    device = resolve_device(params.train.device)
    autocast = autocast_dtype(device, params.train.mixed_precision)
    if needs_grad_scaler(autocast):  # fp16 needs loss scaling, which the judge's short fine-tuning does without
        autocast = None
    judge, measured, scores = fit_and_choose(source, train, validation, rule, params.judge, device=device,
                                             autocast=autocast, log=on_log)
    judge.info.backbone = backbone
    labels = [r["label"] for r in validation]
    measured["against_rule"] = against_the_rule(scores, judge.info.threshold, rule, labels)
    # what "verified: yes" is held to: precision on the same validation readings, per equation shape
    judge.info.verified = measured["verified"] = choose_verified(
        scores, labels, [r["equation"] for r in validation], PRECISION_TARGET, MIN_ACCEPTED)
    if measured["against_rule"]["adopted"]:
        judge.save(out_dir)
    else:  # evaluate, --verify and the served model keep the rule; the figures say what the judge reached
        save_no_judge(out_dir, measured["against_rule"]["reason"],
                      {"validation": measured["validation"], "against_rule": measured["against_rule"]})
    return measured
