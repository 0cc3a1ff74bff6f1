"""Readers for the raw MWP files (see /work/shared/data/raw/SOURCES.md and docs/architecture.md).

Each reader returns `RawProblem`s with string ids and the text/equation exactly as in the source file.
Corrupt input raises `mwpgen.io.DataFormatError` naming the file and the line (and column) at fault:
JSON values are decoded one by one with `JSONDecoder.raw_decode`, so the line where each record starts
is known, and a record missing a key or holding the wrong type is reported at that line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mwpgen.io import DataFormatError, iter_jsonl

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class RawProblem:
    dataset: str
    id: str
    text: str
    equation: str


class _Lines:
    """Maps character offsets to 1-based line numbers incrementally (offsets must not decrease): O(n) overall."""

    def __init__(self, text: str):
        self.text, self.offset, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        self.line += self.text.count("\n", self.offset, pos)
        self.offset = pos
        return self.line


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _decode_at(path, text: str, pos: int, start_line: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"invalid JSON ({e.msg}) in the value starting at line {start_line}",
                              e.lineno, e.colno) from e


def _error_at(path, text: str, pos: int, message: str) -> DataFormatError:
    line = text.count("\n", 0, pos) + 1
    return DataFormatError(path, message, line, pos - (text.rfind("\n", 0, pos) + 1) + 1)


def iter_json_values(path: str | os.PathLike, *, array: bool) -> Iterator[tuple[Any, int]]:
    """Yield (value, line where it starts) for each element of a top-level JSON array (`array=True`) or
    each of a sequence of concatenated JSON values (Math_23K.json), in one linear pass."""
    text = Path(path).read_text(encoding="utf-8")
    lines = _Lines(text)
    pos = _skip_ws(text, 0)
    if array:
        if not text.startswith("[", pos):
            raise _error_at(path, text, pos, "expected a JSON array")
        pos = _skip_ws(text, pos + 1)
        if text.startswith("]", pos):
            pos = _skip_ws(text, pos + 1)
            if pos < len(text):
                raise _error_at(path, text, pos, "extra data after the array")
            return
    while pos < len(text):
        line = lines.at(pos)
        value, end = _decode_at(path, text, pos, line)
        yield value, line
        pos = _skip_ws(text, end)
        if not array:
            continue
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
            if pos >= len(text):
                raise _error_at(path, text, pos, "truncated: array not closed")
        elif text.startswith("]", pos):
            pos = _skip_ws(text, pos + 1)
            if pos < len(text):
                raise _error_at(path, text, pos, "extra data after the array")
            return
        else:
            raise _error_at(
                path, text, pos, "expected ',' or ']'" if pos < len(text) else "truncated: array not closed"
            )
    if array:
        raise _error_at(path, text, pos, "truncated: array not closed")


def _field(path, record: Any, index: int, line: int, key: str, types: type | tuple) -> Any:
    where = f"record {index} (starting at this line)"
    if not isinstance(record, dict):
        raise DataFormatError(path, f"{where}: expected an object, got {type(record).__name__}", line)
    if key not in record:
        raise DataFormatError(path, f"{where}: missing key {key!r}", line)
    value = record[key]
    if not isinstance(value, types) or isinstance(value, bool):
        raise DataFormatError(path, f"{where}: key {key!r} has type {type(value).__name__}", line)
    return value


def read_arithmetic(path: str | os.PathLike) -> list[RawProblem]:
    """Arithmetic (Roy & Roth's aggregate `questions.json`): `sQuestion`, `lEquations[0]`, `iIndex`."""
    problems = []
    for index, (rec, line) in enumerate(iter_json_values(path, array=True)):
        equations = _field(path, rec, index, line, "lEquations", list)
        if not equations or not isinstance(equations[0], str):
            raise DataFormatError(path, f"record {index}: 'lEquations' must hold at least one string", line)
        problems.append(RawProblem("arithmetic", str(_field(path, rec, index, line, "iIndex", (int, str))),
                                   _field(path, rec, index, line, "sQuestion", str), equations[0]))
    return problems


def read_arithmetic_folds(aggregate_dir: str | os.PathLike) -> list[list[str]]:
    """Roy & Roth's 5 CV folds: `fold{k}.txt` holds whitespace-separated iIndex values."""
    folds = []
    for k in range(5):
        path = Path(aggregate_dir) / f"fold{k}.txt"
        fold = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for token in line.split():
                if not token.isdigit():
                    raise DataFormatError(path, f"expected an integer iIndex, got {token!r}", number)
                fold.append(token)
        folds.append(fold)
    return folds


def _read_problems(path: str | os.PathLike, dataset: str, array: bool) -> list[RawProblem]:
    """Records with `id`, `original_text` and `equation` (MAWPS and Chinese Math23K share the field names)."""
    return [RawProblem(dataset, str(_field(path, rec, index, line, "id", (int, str))),
                       _field(path, rec, index, line, "original_text", str),
                       _field(path, rec, index, line, "equation", str))
            for index, (rec, line) in enumerate(iter_json_values(path, array=array))]


def read_mawps(path: str | os.PathLike) -> list[RawProblem]:
    """MAWPS (`MAWPS.json`, a JSON array): `original_text`, `equation`, `id`."""
    return _read_problems(path, "mawps", array=True)


def read_math23k(path: str | os.PathLike) -> list[RawProblem]:
    """Chinese Math23K: concatenated pretty-printed objects (not an array); `original_text`, `equation`, `id`."""
    return _read_problems(path, "math23k", array=False)


def read_math23k_reference(mwp_json: str | os.PathLike, eqs_json: str | os.PathLike) -> list[tuple[str, str]]:
    """The reference English translation: (id, text), where position i holds Chinese id str(i+1).

    `eqs.json` is read only to check that both files have one entry per problem, in the same layout.
    """
    texts = []
    for index, (text, line) in enumerate(iter_json_values(mwp_json, array=True)):
        if not isinstance(text, str):
            raise DataFormatError(mwp_json, f"entry {index}: expected a string, got {type(text).__name__}", line)
        texts.append(text)
    n_eqs = 0
    for index, (eq, line) in enumerate(iter_json_values(eqs_json, array=True)):
        if not (isinstance(eq, list) and len(eq) == 1 and isinstance(eq[0], str)):
            raise DataFormatError(eqs_json, f"entry {index}: expected a one-element list of strings", line)
        n_eqs += 1
    if n_eqs != len(texts):
        raise DataFormatError(eqs_json, f"{n_eqs} equations but {len(texts)} texts in {mwp_json}")
    return [(str(i + 1), text) for i, text in enumerate(texts)]


def read_translated_math23k(jsonl_path: str | os.PathLike) -> list[RawProblem]:
    """The translate stage's output: `{"id", "text_zh", "text", "equation"}` per line (English `text`)."""
    problems = []
    for line, rec in _numbered_jsonl(jsonl_path):
        values = []
        for key in ("id", "text", "equation"):
            if key not in rec:
                raise DataFormatError(jsonl_path, f"missing key {key!r}", line)
            if not isinstance(rec[key], str):
                raise DataFormatError(jsonl_path, f"key {key!r} has type {type(rec[key]).__name__}", line)
            values.append(rec[key])
        problems.append(RawProblem("math23k", *values))
    return problems


def _numbered_jsonl(path) -> Iterator[tuple[int, dict]]:
    """iter_jsonl skips blank lines, so recover each object's line number from the file itself."""
    numbers = [n for n, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), start=1) if line.strip()]
    yield from zip(numbers, iter_jsonl(path))


def math23k_english(chinese: list[RawProblem], reference: list[tuple[str, str]]) -> list[RawProblem]:
    """Math23K with the reference English text and the Chinese file's equation, joined on id."""
    english = dict(reference)
    missing = [p.id for p in chinese if p.id not in english]
    if missing:
        raise ValueError(f"{len(missing)} Math23K ids lack an English text, e.g. {missing[:3]}")
    return [RawProblem("math23k", p.id, english[p.id], p.equation) for p in chinese]
