"""Stage `translate`: Math23K Chinese -> English behind the resumable translation cache.

The cache is seeded with the reference English translation (record i <-> Chinese id i+1, SOURCES.md), so offline
the stage completes without a network call; cache misses go to deep-translator with a timeout and bounded
retries. On failure the cache keeps every finished batch and the stage exits non-zero naming how many records
are untranslated; the rerun resumes.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.common import PROJECT_ROOT, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import TranslateParams
from mwpgen.data.raw import read_math23k, read_math23k_reference
from mwpgen.io import write_json, write_jsonl
from mwpgen.data.translate import (DeepTranslatorBackend, TranslationCache, TranslationIncomplete, seed_from_reference,
                              translate_all)
from tracking.runs import stage_run

RAW = PROJECT_ROOT / "data" / "raw"
CACHE = PROJECT_ROOT / "data" / "cache" / "translations.jsonl"
OUT = PROJECT_ROOT / "data" / "translated" / "math23k.jsonl"
METRICS = PROJECT_ROOT / "metrics" / "translate.json"


# Retries are per batch inside translate_all (the cache is flushed between batches), not per task.
@task(cache_policy=NO_CACHE)
def translate_math23k(params: TranslateParams, run) -> dict:
    log = get_run_logger()
    chinese = read_math23k(RAW / "math23k" / "Math_23K.json")
    cache = TranslationCache(CACHE, params.source_lang, params.target_lang)
    if cache.repaired:
        log.warning("dropped a truncated last line of %s (a run was killed mid-write)", CACHE)
    seeded = {}
    if params.seed_from_reference:
        by_id = {p.id: p.text for p in chinese}
        reference = read_math23k_reference(RAW / "math23k_en" / "mwp.json", RAW / "math23k_en" / "eqs.json")
        report = seed_from_reference(cache, [(by_id[i], en) for i, en in reference if i in by_id])
        seeded = {"seed_pairs": report.pairs, "seed_added": report.added,
                  "seed_duplicate_sources": report.duplicate_sources}
        log.info("seeded the cache with %d reference translations (%d new)", report.pairs, report.added)

    backend = DeepTranslatorBackend(params.provider, params.source_lang, params.target_lang, params.timeout_s)
    start = time.time()
    try:
        result = translate_all([(p.id, p.text) for p in chinese], cache, backend, params.batch_size,
                               params.max_retries, params.backoff_s,
                               progress=lambda done, total: log.info("translated %d/%d", done, total))
    except TranslationIncomplete as e:
        run.metrics({"untranslated": e.untranslated, "cache_hits": e.report.hits, "cache_misses": e.report.misses})
        raise
    equations = {p.id: p.equation for p in chinese}
    rows = [{**row, "equation": equations[row["id"]]} for row in result.rows]
    write_jsonl(OUT, rows)
    metrics = {"records": result.total, "cache_hits": result.hits, "cache_misses": result.misses,
               "translated_now": result.translated_now, "untranslated": result.untranslated,
               "translator_calls": result.translator_calls, "wall_s": round(time.time() - start, 3), **seeded}
    log.info("cache hits %d, misses %d, translated now %d", result.hits, result.misses, result.translated_now)
    return metrics


@flow(name="translate")
def translate(params: TranslateParams) -> dict:
    with stage_run("translate") as run:
        run.params(params.model_dump())
        metrics = translate_math23k(params, run)
        write_json(METRICS, metrics)
        run.metrics(metrics)
        run.artifact(OUT)
        run.artifact(METRICS)
    return metrics


if __name__ == "__main__":
    run_stage(translate, params_or_exit(stage_args(__doc__).params).translate, failed_metrics=[METRICS])
