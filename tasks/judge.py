"""The learned consistency judge's probabilities for problems (mwpgen/judge/model.py): its verdicts in the
evaluate and measure_judge stages."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import Params
from mwpgen.device import resolve_device
from mwpgen.judge.model import LearnedJudge
from mwpgen.judge.saved import JudgeInfo


@task(cache_policy=NO_CACHE)
def judge_probabilities(params: Params, judge_dir: Path, problems: list[str],
                        equations: list[str]) -> tuple[list[float], JudgeInfo]:
    """(p(problem encodes equation) per pair, what the judge is: its threshold and whether the rule gates it) of the
    judge saved in `judge_dir`."""
    judge = LearnedJudge.load(judge_dir, resolve_device(params.train.device))
    return judge.probabilities(problems, equations, batch_size=params.generate.batch_size), judge.info
