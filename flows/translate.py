"""Stage `translate`: Math23K Chinese -> English behind the resumable translation cache.

The cache is seeded with the reference English translation (record i <-> Chinese id i+1, SOURCES.md), so offline
the stage completes without a network call; cache misses go to deep-translator with a timeout and bounded
retries. On failure the cache keeps every finished batch and the stage exits non-zero naming how many records
are untranslated; the rerun resumes.
"""

from __future__ import annotations

from prefect import flow

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import TranslateParams
from mwpgen.io import write_json
from tasks.translate import translate_math23k
from tracking.runs import stage_run

RAW = PROJECT_ROOT / "data" / "raw"
CACHE = PROJECT_ROOT / "data" / "cache" / "translations.jsonl"
OUT = PROJECT_ROOT / "data" / "translated" / "math23k.jsonl"
METRICS = PROJECT_ROOT / "metrics" / "translate.json"


@flow(name="translate")
def translate(params: TranslateParams) -> dict:
    with stage_run("translate") as run:
        run.params(params.model_dump())
        metrics = translate_math23k(params, RAW, CACHE, OUT, run)
        write_json(METRICS, metrics)
        run.metrics(metrics)
        run.artifact(OUT)
        run.artifact(METRICS)
    return metrics


if __name__ == "__main__":
    run_stage(translate, params_or_exit(stage_args(__doc__).params).translate, failed_metrics=[METRICS])
