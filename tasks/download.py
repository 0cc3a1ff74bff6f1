"""Download task: one Prefect task per raw file, retried on network failures only."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from mwpgen.data.fetch import Fetched, SourceUnavailable, fetch_file
from mwpgen.data.sources import SourceFile


def _network_failure(task, task_run, state) -> bool:
    try:
        state.result()
    except SourceUnavailable:
        return True
    except Exception:
        return False  # a checksum mismatch will not get better by retrying
    return False


# DVC decides what is stale, so Prefect's result cache is off: a task must never skip writing its file.
@task(cache_policy=NO_CACHE, retry_condition_fn=_network_failure, retry_delay_seconds=5)
def fetch_source(src: SourceFile, dest_root: Path, mirror: Path | None, timeout_s: float) -> Fetched:
    return fetch_file(src, dest_root, mirror, timeout_s=timeout_s, retries=0)
