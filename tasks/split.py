"""Split task: one dataset's 5 folds (Roy & Roth's published ones for Arithmetic, seeded ones elsewhere)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import SplitParams
from mwpgen.data.raw import read_arithmetic_folds
from mwpgen.data.splits import given_folds, seeded_folds, write_splits
from mwpgen.io import read_jsonl


@task(cache_policy=NO_CACHE)
def split_dataset(dataset: str, params: SplitParams, processed: Path, published_folds: Path, splits: Path) -> dict:
    log = get_run_logger()
    records = read_jsonl(processed / f"{dataset}.jsonl")
    info: dict = {}
    if dataset == "arithmetic":
        published = read_arithmetic_folds(published_folds)
        if len(published) != params.n_folds:
            raise ValueError(f"split.n_folds = {params.n_folds}, but Roy & Roth publish {len(published)} "
                             "Arithmetic folds; set n_folds to 5")
        folds, report = given_folds(records, published)
        info = {"dropped_quarantined": len(report.dropped_ids), "duplicate_groups_across_folds": report.n_leak_groups,
                "duplicate_ids_across_folds": report.n_leak_ids}
        if report.n_leak_groups:
            log.warning("Roy & Roth's folds put %d groups of identical masked texts in different folds (kept as "
                        "published): %s", report.n_leak_groups, report.leak_groups)
        write_splits(splits / f"{dataset}.json", dataset, folds, len(folds), None, "roy_roth")
    else:
        folds = seeded_folds(records, params.n_folds, params.seed)
        write_splits(splits / f"{dataset}.json", dataset, folds, params.n_folds, params.seed, "seeded")
    info["fold_sizes"] = [len(f) for f in folds]
    return info
