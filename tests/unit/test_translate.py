"""Translation cache and resumable translate_all; never touches the network (fake translators only)."""

from __future__ import annotations

import json
import time

import pytest

from mwpgen.data.translate import (
    DeepTranslatorBackend,
    TranslationCache,
    TranslationIncomplete,
    TranslationTimeout,
    cache_key,
    call_with_timeout,
    seed_from_reference,
    translate_all,
)


class FakeTranslator:
    """Upper-cases text; raises on the batch numbers in `fail_on` (1-based, counting every call)."""

    origin = "fake"

    def __init__(self, fail_on: set[int] | None = None, always_fail: bool = False):
        self.calls: list[list[str]] = []
        self.fail_on = fail_on or set()
        self.always_fail = always_fail

    def translate_batch(self, texts: list[str]) -> list[str]:
        self.calls.append(list(texts))
        if self.always_fail or len(self.calls) in self.fail_on:
            raise ConnectionError("network unreachable")
        return [t.upper() for t in texts]


def records(n: int) -> list[tuple[str, str]]:
    return [(str(i + 1), f"zh text {i + 1}") for i in range(n)]


def no_sleep(_: float) -> None:
    pass


def test_cache_round_trip(tmp_path):
    path = tmp_path / "cache" / "translations.jsonl"
    cache = TranslationCache(path)
    assert cache.get("一") is None and cache.misses == 1
    assert cache.add_many([("一", "one", "reference"), ("二", "two", "google")]) == 2
    assert cache.add_many([("一", "ONE", "google")]) == 0  # first row for a key wins, no duplicate line
    reopened = TranslationCache(path)
    assert len(reopened) == 2
    assert reopened.get("一") == "one" and reopened.get("二") == "two" and reopened.hits == 2
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == {"key": cache_key("一", "zh-CN", "en"), "source": "一", "target": "one", "origin": "reference"}
    assert cache_key("一", "zh-CN", "en") != cache_key("一", "zh-CN", "fr")


def test_seeded_cache_needs_no_translator_calls(tmp_path):
    recs = records(7) + [("8", "zh text 1")]  # a repeated Chinese text
    cache = TranslationCache(tmp_path / "c.jsonl")
    seed = seed_from_reference(cache, [(t, f"en {i}") for i, (_, t) in enumerate(recs)])
    assert (seed.added, seed.duplicate_sources, seed.conflicting_duplicates) == (7, 1, 1)
    fake = FakeTranslator()
    report = translate_all(recs, cache, fake, batch_size=3, sleep=no_sleep)
    assert fake.calls == []
    assert (report.total, report.hits, report.misses, report.untranslated) == (8, 8, 0, 0)
    assert report.rows[-1] == {"id": "8", "text_zh": "zh text 1", "text": "en 0"}  # first translation wins
    assert seed_from_reference(cache, [("zh text 1", "other")]).already_present == 1


def test_resume_after_failure_mid_run(tmp_path):
    path = tmp_path / "c.jsonl"
    recs = records(10)
    broken = FakeTranslator(fail_on={3, 4, 5})  # third batch fails, and so do its two retries
    with pytest.raises(TranslationIncomplete) as info:
        translate_all(recs, TranslationCache(path), broken, batch_size=2, max_retries=2, sleep=no_sleep)
    err = info.value
    assert err.untranslated == 6 and err.report.translated_now == 4
    assert "6 of 10 Math23K records are untranslated" in str(err) and str(path) in str(err)
    assert "ConnectionError" in str(err)
    assert [r["id"] for r in err.report.rows] == ["1", "2", "3", "4"]
    assert len(path.read_text(encoding="utf-8").splitlines()) == 4  # the two good batches are on disk

    healthy = FakeTranslator()
    report = translate_all(recs, TranslationCache(path), healthy, batch_size=2, sleep=no_sleep)
    assert [t for batch in healthy.calls for t in batch] == [t for _, t in recs[4:]]
    assert (report.hits, report.translated_now, report.untranslated) == (4, 6, 0)
    assert [r["text"] for r in report.rows] == [t.upper() for _, t in recs]


def test_truncated_last_line_is_tolerated_and_repaired(tmp_path):
    path = tmp_path / "c.jsonl"
    TranslationCache(path).add_many([("一", "one", "reference")])
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"key": "abc", "source": "二", "tar')  # killed mid-append
    cache = TranslationCache(path)
    assert cache.repaired and len(cache) == 1
    cache.add_many([("二", "two", "google")])
    reopened = TranslationCache(path)
    assert not reopened.repaired and reopened.peek("二") == "two" and len(reopened) == 2


def test_retries_are_bounded_with_exponential_backoff(tmp_path):
    fake = FakeTranslator(always_fail=True)
    sleeps: list[float] = []
    with pytest.raises(TranslationIncomplete) as info:
        translate_all(records(5), TranslationCache(tmp_path / "c.jsonl"), fake, batch_size=2, max_retries=3,
                      backoff_s=0.5, sleep=sleeps.append)
    assert len(fake.calls) == 4  # one try + three retries, then stop: later batches are not attempted
    assert sleeps == [0.5, 1.0, 2.0]
    assert info.value.untranslated == 5 and info.value.report.translator_calls == 4


def test_wrong_result_count_counts_as_failure(tmp_path):
    class Short:
        def translate_batch(self, texts):
            return texts[:-1]

    with pytest.raises(TranslationIncomplete, match="returned 1 results for 2 texts"):
        translate_all(records(2), TranslationCache(tmp_path / "c.jsonl"), Short(), max_retries=0, sleep=no_sleep)


def test_timeout_wrapper_fires_on_a_hanging_call():
    start = time.monotonic()
    with pytest.raises(TranslationTimeout):
        call_with_timeout(time.sleep, 5, timeout_s=0.05)
    assert time.monotonic() - start < 1.0
    assert call_with_timeout(lambda x: x + 1, 1, timeout_s=1.0) == 2
    with pytest.raises(ZeroDivisionError):
        call_with_timeout(lambda: 1 / 0, timeout_s=1.0)


def test_backend_times_out_a_hanging_provider(monkeypatch):
    backend = DeepTranslatorBackend(timeout_s=0.05)
    monkeypatch.setattr(backend, "_translate_one", lambda text: time.sleep(5))
    start = time.monotonic()
    with pytest.raises(TranslationTimeout):
        backend.translate_batch(["你好"])
    assert time.monotonic() - start < 1.0


def test_backend_rejects_unknown_provider():
    with pytest.raises(ValueError, match="unsupported translation provider"):
        DeepTranslatorBackend(provider="babelfish")


def test_module_imports_without_deep_translator():
    import sys

    import mwpgen.data.translate as mod

    assert "deep_translator" not in vars(mod)
    assert mod.DeepTranslatorBackend  # constructing it does not import deep_translator either
    before = "deep_translator" in sys.modules
    DeepTranslatorBackend()
    assert ("deep_translator" in sys.modules) == before
