"""File helpers shared by every stage: atomic writes and JSON readers whose errors name file and position."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class DataFormatError(ValueError):
    """A data file cannot be parsed; the message names the file and the line/column at fault."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None, column: int | None = None):
        where = str(path)
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.column = str(path), line, column


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def umask() -> int:
    """The process umask, read without changing it (os.umask can only be read by setting it, which would race
    with other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def ordinary_mode(path: str | os.PathLike, directory: bool = False) -> None:
    """Give a file made by mkstemp/mkdtemp (always private, 0600/0700) the mode open() would have given it."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write to a temp file beside `path`, then rename: readers never see a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        ordinary_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


# results/generations/<model>/<dataset>/fold<k>.csv: one row per test problem (the generate stage writes it).
GENERATION_COLUMNS = ["fold", "id", "equation", "context", "reference", "generated"]


def write_generations(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=GENERATION_COLUMNS, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def read_generations(path: str | os.PathLike) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def read_json(path: str | os.PathLike) -> Any:
    text = Path(path).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(path, f"invalid JSON ({e.msg}, char {e.pos})", e.lineno, e.colno) from e


def iter_jsonl(path: str | os.PathLike, *, skip_truncated_tail: bool = False) -> Iterator[dict]:
    """Yield one object per non-empty line.

    With `skip_truncated_tail`, a last line without its newline that fails to parse is ignored (an append that
    was interrupted mid-write); any other bad line raises DataFormatError naming the line.
    """
    path = Path(path)
    raw = path.read_text(encoding="utf-8")
    lines = raw.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            is_tail = number == len(lines) and not raw.endswith("\n")
            if skip_truncated_tail and is_tail:
                return
            raise DataFormatError(path, f"invalid JSON line ({e.msg})", number, e.colno) from e
        if not isinstance(obj, dict):
            raise DataFormatError(path, f"expected a JSON object, got {type(obj).__name__}", number)
        yield obj


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))


@contextmanager
def atomic_directory(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside `out_dir`; on success it replaces `out_dir` whole, on error it is removed.

    A killed process leaves only a `.<name>.tmp-*` sibling, never a half-written `out_dir`.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
    ordinary_mode(tmp, directory=True)
    try:
        yield tmp
        old = None
        if out_dir.exists():  # rename() cannot replace a non-empty folder: move the old one aside first
            old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
            os.replace(out_dir, old / "d")
        os.replace(tmp, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
