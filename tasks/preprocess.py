"""Preprocess task: one dataset's problems masked and written, the unrepresentable ones quarantined with a reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mwpgen.data.preprocess import dataset_stats, preprocess_problems
from mwpgen.data.raw import RawProblem
from mwpgen.io import write_jsonl


@task(cache_policy=NO_CACHE)
def preprocess_dataset(dataset: str, read: Callable[[], list[RawProblem]], constants: list[float], processed: Path,
                       quarantine: Path) -> dict:
    log = get_run_logger()
    problems = read()
    records, quarantined = preprocess_problems(problems, constants)
    write_jsonl(processed / f"{dataset}.jsonl", records)
    write_jsonl(quarantine / f"{dataset}.jsonl", quarantined)
    reasons = Counter(q["reason"] for q in quarantined)
    log.info("%s: %d problems, %d kept, %d quarantined %s", dataset, len(problems), len(records),
             len(quarantined), dict(reasons))
    return dataset_stats(records, len(problems), quarantined)
