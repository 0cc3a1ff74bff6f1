"""Stage `split`: 5-fold cross-validation. Arithmetic keeps Roy & Roth's published folds; MAWPS and Math23K get
seeded folds with exact-duplicate problem texts kept in one fold, so no test problem leaks into training."""

from __future__ import annotations

from prefect import flow

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import DATASETS, SplitParams
from mwpgen.io import write_json
from tasks.split import split_dataset
from tracking.runs import stage_run

PROCESSED = PROJECT_ROOT / "data" / "processed"
SPLITS = PROJECT_ROOT / "data" / "splits"
PUBLISHED_FOLDS = PROJECT_ROOT / "data" / "raw" / "arithmetic" / "aggregate"
METRICS = PROJECT_ROOT / "metrics" / "splits.json"


@flow(name="split")
def split(params: SplitParams) -> dict:
    with stage_run("split") as run:
        run.params(params.model_dump())
        metrics = {d: split_dataset(d, params, PROCESSED, PUBLISHED_FOLDS, SPLITS) for d in DATASETS}
        write_json(METRICS, metrics)
        for dataset, info in metrics.items():
            run.metrics({f"{dataset}.{k}": v for k, v in info.items() if isinstance(v, int)})
        run.artifact(METRICS)
        run.artifact(SPLITS, "splits")
    return metrics


if __name__ == "__main__":
    run_stage(split, params_or_exit(stage_args(__doc__).params).split,
              failed_metrics=[PROJECT_ROOT / "metrics" / "splits.json"])
