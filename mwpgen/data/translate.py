"""Math23K Chinese -> English translation behind a resumable, append-only cache.

Why a cache: machine translation of 23,162 problems is slow, rate-limited and can die halfway. Every finished
batch is appended (flush + fsync) to `data/cache/translations.jsonl`, so a rerun only translates what is left,
and the reference English translation (rsk25/PCMG, by the paper's first author) can be seeded into the cache so
that no network call is needed at all. Row format and key: see docs/architecture.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mwpgen.io import DataFormatError, atomic_write_text, iter_jsonl

SOURCE_LANG = "zh-CN"
TARGET_LANG = "en"


def cache_key(text: str, source_lang: str = SOURCE_LANG, target_lang: str = TARGET_LANG) -> str:
    """sha256 of source_lang TAB target_lang TAB text: the same text in another language pair never collides."""
    return hashlib.sha256(f"{source_lang}\t{target_lang}\t{text}".encode()).hexdigest()


class TranslationCache:
    """Append-only JSONL cache `{"key", "source", "target", "origin"}`; the first row for a key wins.

    On open, a truncated last line (a run killed mid-append) is dropped and the file is rewritten atomically, so
    the next append starts on a clean line instead of gluing onto half a JSON object.
    """

    def __init__(self, path: str | os.PathLike, source_lang: str = SOURCE_LANG, target_lang: str = TARGET_LANG):
        self.path = Path(path)
        self.source_lang, self.target_lang = source_lang, target_lang
        self.hits = 0
        self.misses = 0
        self.repaired = False
        self._targets: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        rows: list[dict] = []
        for number, row in enumerate(iter_jsonl(self.path, skip_truncated_tail=True), start=1):
            if not isinstance(row.get("key"), str) or not isinstance(row.get("target"), str):
                raise DataFormatError(self.path, "cache row lacks a string 'key' or 'target'", number)
            rows.append(row)
            self._targets.setdefault(row["key"], row["target"])
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                clean_end = f.read(1) == b"\n"
            if not clean_end:  # truncated tail, or a valid last row missing its newline
                atomic_write_text(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
                self.repaired = True

    def key(self, text: str) -> str:
        return cache_key(text, self.source_lang, self.target_lang)

    def __len__(self) -> int:
        return len(self._targets)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.key(text) in self._targets

    def peek(self, text: str) -> str | None:
        """Like get() but not counted (for re-reading results after a run)."""
        return self._targets.get(self.key(text))

    def get(self, text: str) -> str | None:
        """The cached translation of `text`, or None; counts a hit or a miss."""
        target = self._targets.get(self.key(text))
        if target is None:
            self.misses += 1
        else:
            self.hits += 1
        return target

    def add_many(self, rows: Iterable[tuple[str, str, str]]) -> int:
        """Append `(source, target, origin)` rows whose key is new; flush + fsync once. Returns rows written."""
        lines: list[str] = []
        for source, target, origin in rows:
            key = self.key(source)
            if key in self._targets:
                continue
            self._targets[key] = target
            row = {"key": key, "source": source, "target": target, "origin": origin}
            lines.append(json.dumps(row, ensure_ascii=False) + "\n")
        if lines:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(lines))
                f.flush()
                os.fsync(f.fileno())
        return len(lines)


@dataclass
class SeedReport:
    pairs: int
    added: int
    already_present: int
    duplicate_sources: int  # pairs whose Chinese text repeats an earlier pair (the first pair's English wins)
    conflicting_duplicates: int  # ... of which the English differs from the one kept


def seed_from_reference(cache: TranslationCache, pairs: Sequence[tuple[str, str]]) -> SeedReport:
    """Add reference translations (origin "reference") for Chinese texts not yet cached; first pair wins."""
    first: dict[str, str] = {}
    duplicates = conflicts = 0
    for zh, en in pairs:
        if zh in first:
            duplicates += 1
            conflicts += first[zh] != en
        else:
            first[zh] = en
    new = [(zh, en, "reference") for zh, en in first.items() if zh not in cache]
    added = cache.add_many(new)
    return SeedReport(len(pairs), added, len(first) - len(new), duplicates, conflicts)


class Translator(Protocol):
    def translate_batch(self, texts: list[str]) -> list[str]: ...


class TranslationTimeout(TimeoutError):
    pass


def call_with_timeout(fn: Callable[..., Any], *args: Any, timeout_s: float) -> Any:
    """Run `fn(*args)` in a daemon thread and give up after `timeout_s` seconds.

    A daemon thread (not a ThreadPoolExecutor, whose workers are joined at interpreter exit) so that a request
    hung on a dead connection can neither block the caller nor keep the process alive.
    """
    box: queue.Queue = queue.Queue(maxsize=1)

    def run() -> None:
        try:
            box.put((True, fn(*args)))
        except BaseException as e:  # handed to the caller below
            box.put((False, e))

    threading.Thread(target=run, name="translate-call", daemon=True).start()
    try:
        ok, value = box.get(timeout=timeout_s)
    except queue.Empty:
        raise TranslationTimeout(f"translation call took longer than {timeout_s:g} s") from None
    if not ok:
        raise value
    return value


class DeepTranslatorBackend:
    """deep-translator's GoogleTranslator with a per-request timeout (deep-translator calls requests without one).

    A fresh client is built per text: GoogleTranslator keeps request state in `_url_params`, and a timed-out
    request may still be running in its abandoned thread.
    """

    def __init__(self, provider: str = "google", source: str = SOURCE_LANG, target: str = TARGET_LANG,
                 timeout_s: float = 10.0):
        if provider != "google":
            raise ValueError(f"unsupported translation provider {provider!r} (supported: 'google')")
        self.provider, self.source, self.target, self.timeout_s = provider, source, target, timeout_s
        self.origin = provider

    def _translate_one(self, text: str) -> str:
        from deep_translator import GoogleTranslator  # lazy: the module must import without deep-translator

        result = GoogleTranslator(source=self.source, target=self.target).translate(text)
        if not isinstance(result, str) or (text.strip() and not result.strip()):
            raise RuntimeError(f"{self.provider} returned no translation for {text[:40]!r}")
        return result

    def translate_batch(self, texts: list[str]) -> list[str]:
        return [call_with_timeout(self._translate_one, t, timeout_s=self.timeout_s) for t in texts]


@dataclass
class TranslationReport:
    total: int  # records given
    hits: int  # records already cached at the start
    misses: int  # records not cached at the start
    translated_now: int  # records translated in this run
    untranslated: int  # records still without a translation
    texts_sent: int = 0  # distinct texts translated in this run (duplicates are sent once)
    translator_calls: int = 0  # translate_batch calls, retries included
    last_error: str | None = None
    rows: list[dict] = field(default_factory=list)  # {"id", "text_zh", "text"} in input order


class TranslationIncomplete(Exception):
    """A batch still failed after its retries; everything before it is in the cache."""

    def __init__(self, report: TranslationReport, cache_path: str | os.PathLike, label: str = "Math23K"):
        self.report = report
        self.untranslated, self.total = report.untranslated, report.total
        super().__init__(
            f"{report.untranslated} of {report.total} {label} records are untranslated "
            f"(last error: {report.last_error}); progress is saved in {cache_path}; rerun to resume"
        )


def translate_all(records: Sequence[tuple[Any, str]], cache: TranslationCache, translator: Translator,
                  batch_size: int = 50, max_retries: int = 3, backoff_s: float = 2.0,
                  progress: Callable[[int, int], None] | None = None, *,
                  sleep: Callable[[float], None] = time.sleep, origin: str | None = None,
                  label: str = "Math23K") -> TranslationReport:
    """Translate every `(id, chinese_text)` not in `cache`, batch by batch, appending each batch to the cache.

    A failing batch is retried `max_retries` times with backoff `backoff_s * 2**attempt`; if it still fails,
    raises TranslationIncomplete (its `.report` has the counts). `progress(done_texts, total_texts)` is called
    after every batch.
    """
    if batch_size < 1 or max_retries < 0:
        raise ValueError("batch_size must be >= 1 and max_retries >= 0")
    origin = origin or getattr(translator, "origin", None) or type(translator).__name__
    cached = [cache.get(text) is not None for _, text in records]
    hits = sum(cached)
    todo = list(dict.fromkeys(text for (_, text), hit in zip(records, cached) if not hit))
    report = TranslationReport(total=len(records), hits=hits, misses=len(records) - hits, translated_now=0,
                               untranslated=0)
    failed = False
    for start in range(0, len(todo), batch_size):
        batch = todo[start:start + batch_size]
        for attempt in range(max_retries + 1):
            if attempt:
                sleep(backoff_s * 2 ** (attempt - 1))
            report.translator_calls += 1
            try:
                out = translator.translate_batch(list(batch))
                if len(out) != len(batch) or not all(isinstance(t, str) for t in out):
                    raise ValueError(f"translator returned {len(out)} results for {len(batch)} texts")
            except Exception as e:  # any provider error is retried; KeyboardInterrupt is not
                report.last_error = f"{type(e).__name__}: {e}"
                continue
            cache.add_many(zip(batch, out, [origin] * len(batch)))
            report.texts_sent += len(batch)
            break
        else:
            failed = True
            break
        if progress is not None:
            progress(start + len(batch), len(todo))
    for (rid, text), hit in zip(records, cached):
        target = cache.peek(text)
        if target is None:
            report.untranslated += 1
            continue
        report.translated_now += not hit
        report.rows.append({"id": str(rid), "text_zh": text, "text": target})
    if failed:
        raise TranslationIncomplete(report, cache.path, label)
    return report
