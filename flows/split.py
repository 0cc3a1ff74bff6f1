"""Stage `split`: 5-fold cross-validation. Arithmetic keeps Roy & Roth's published folds; MAWPS and Math23K get
seeded folds with exact-duplicate problem texts kept in one fold, so no test problem leaks into training."""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import DATASETS, SplitParams
from mwpgen.data.raw import read_arithmetic_folds
from mwpgen.io import read_jsonl, write_json
from mwpgen.data.splits import given_folds, seeded_folds, write_splits
from tracking.runs import stage_run

PROCESSED = PROJECT_ROOT / "data" / "processed"
SPLITS = PROJECT_ROOT / "data" / "splits"
METRICS = PROJECT_ROOT / "metrics" / "splits.json"


@task(cache_policy=NO_CACHE)
def split_dataset(dataset: str, params: SplitParams) -> dict:
    log = get_run_logger()
    records = read_jsonl(PROCESSED / f"{dataset}.jsonl")
    info: dict = {}
    if dataset == "arithmetic":
        published = read_arithmetic_folds(PROJECT_ROOT / "data" / "raw" / "arithmetic" / "aggregate")
        if len(published) != params.n_folds:
            raise ValueError(f"split.n_folds = {params.n_folds}, but Roy & Roth publish {len(published)} "
                             "Arithmetic folds; set n_folds to 5")
        folds, report = given_folds(records, published)
        info = {"dropped_quarantined": len(report.dropped_ids), "duplicate_groups_across_folds": report.n_leak_groups,
                "duplicate_ids_across_folds": report.n_leak_ids}
        if report.n_leak_groups:
            log.warning("Roy & Roth's folds put %d groups of identical masked texts in different folds (kept as "
                        "published): %s", report.n_leak_groups, report.leak_groups)
        write_splits(SPLITS / f"{dataset}.json", dataset, folds, len(folds), None, "roy_roth")
    else:
        folds = seeded_folds(records, params.n_folds, params.seed)
        write_splits(SPLITS / f"{dataset}.json", dataset, folds, params.n_folds, params.seed, "seeded")
    info["fold_sizes"] = [len(f) for f in folds]
    return info


@flow(name="split")
def split(params: SplitParams) -> dict:
    with stage_run("split") as run:
        run.params(params.model_dump())
        metrics = {d: split_dataset(d, params) for d in DATASETS}
        write_json(METRICS, metrics)
        for dataset, info in metrics.items():
            run.metrics({f"{dataset}.{k}": v for k, v in info.items() if isinstance(v, int)})
        run.artifact(METRICS)
        run.artifact(SPLITS, "splits")
    return metrics


if __name__ == "__main__":
    run_stage(split, params_or_exit(stage_args(__doc__).params).split,
              failed_metrics=[PROJECT_ROOT / "metrics" / "splits.json"])
