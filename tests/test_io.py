"""Shared file helpers: atomic folder replacement and JSONL errors that name the line."""

from __future__ import annotations

import pytest

from mwpgen.io import DataFormatError, atomic_directory, iter_jsonl


def test_atomic_directory_replaces_whole_or_not_at_all(tmp_path):
    out = tmp_path / "ckpt"
    with atomic_directory(out) as tmp:
        (tmp / "a.txt").write_text("1")
    assert (out / "a.txt").read_text() == "1"
    with pytest.raises(RuntimeError):
        with atomic_directory(out) as tmp:
            (tmp / "b.txt").write_text("2")
            raise RuntimeError("killed mid-write")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]  # the old folder is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no temp folder left behind
    with atomic_directory(out) as tmp:
        (tmp / "c.txt").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == ["c.txt"]


def test_jsonl_errors_name_the_line_and_tolerate_a_truncated_tail(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert [r["a"] for r in iter_jsonl(path, skip_truncated_tail=True)] == [1, 2]
    with pytest.raises(DataFormatError, match=r"rows.jsonl:3:"):
        list(iter_jsonl(path))
    path.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    with pytest.raises(DataFormatError, match=r"rows.jsonl:2:"):
        list(iter_jsonl(path, skip_truncated_tail=True))
