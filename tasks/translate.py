"""Translate task: Math23K's Chinese problems into English behind the resumable cache, seeded from the reference
translation (record i <-> Chinese id i+1)."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from mwpgen.config.schema import TranslateParams
from mwpgen.data.raw import read_math23k, read_math23k_reference
from mwpgen.data.translate import (
    DeepTranslatorBackend,
    TranslationCache,
    TranslationIncomplete,
    seed_from_reference,
    translate_all,
)
from mwpgen.io import write_jsonl


# Retries are per batch inside translate_all (the cache is flushed between batches), not per task.
@task(cache_policy=NO_CACHE)
def translate_math23k(params: TranslateParams, raw: Path, cache_path: Path, out: Path, run) -> dict:
    log = get_run_logger()
    chinese = read_math23k(raw / "math23k" / "Math_23K.json")
    cache = TranslationCache(cache_path, params.source_lang, params.target_lang)
    if cache.repaired:
        log.warning("dropped a truncated last line of %s (a run was killed mid-write)", cache_path)
    seeded = {}
    if params.seed_from_reference:
        by_id = {p.id: p.text for p in chinese}
        reference = read_math23k_reference(raw / "math23k_en" / "mwp.json", raw / "math23k_en" / "eqs.json")
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
    write_jsonl(out, rows)
    metrics = {"records": result.total, "cache_hits": result.hits, "cache_misses": result.misses,
               "translated_now": result.translated_now, "untranslated": result.untranslated,
               "translator_calls": result.translator_calls, "wall_s": round(time.time() - start, 3), **seeded}
    log.info("cache hits %d, misses %d, translated now %d", result.hits, result.misses, result.translated_now)
    return metrics
