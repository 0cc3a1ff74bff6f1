"""Stage `preprocess`: number masking (num1, num2, ... in text order), equations as `x = ...` symbol sequences,
a quarantine file per dataset for records that cannot be represented, and the paper's Table 1 statistics."""

from __future__ import annotations

from prefect import flow

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import DATASETS, PreprocessParams
from mwpgen.data.preprocess import PAPER_TABLE1
from mwpgen.data.raw import read_arithmetic, read_mawps, read_translated_math23k
from mwpgen.io import write_json
from tasks.preprocess import preprocess_dataset
from tracking.runs import stage_run

RAW = PROJECT_ROOT / "data" / "raw"
PROCESSED = PROJECT_ROOT / "data" / "processed"
QUARANTINE = PROJECT_ROOT / "data" / "quarantine"
STATS = PROJECT_ROOT / "metrics" / "data_stats.json"

READERS = {
    "arithmetic": lambda: read_arithmetic(RAW / "arithmetic" / "questions.json"),
    "mawps": lambda: read_mawps(RAW / "mawps" / "MAWPS.json"),
    "math23k": lambda: read_translated_math23k(PROJECT_ROOT / "data" / "translated" / "math23k.jsonl"),
}


@flow(name="preprocess")
def preprocess(params: PreprocessParams) -> dict:
    with stage_run("preprocess") as run:
        run.params(params.model_dump())
        stats = {}
        for dataset in DATASETS:
            ours = preprocess_dataset(dataset, READERS[dataset], params.constants, PROCESSED, QUARANTINE)
            stats[dataset] = {"ours": ours, "paper": PAPER_TABLE1[dataset]}
            flat = {f"{dataset}.{k}": v for k, v in stats[dataset]["ours"].items() if isinstance(v, (int, float))}
            run.metrics(flat)
        write_json(STATS, stats)
        for path in (STATS, PROCESSED, QUARANTINE):
            run.artifact(path, None if path.is_file() else path.name)
    return stats


if __name__ == "__main__":
    run_stage(preprocess, params_or_exit(stage_args(__doc__).params).preprocess,
              failed_metrics=[PROJECT_ROOT / "metrics" / "data_stats.json"])
