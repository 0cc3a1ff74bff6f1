"""Shared file helpers: atomic folder replacement and JSONL errors that name the line."""

from __future__ import annotations

import os
import stat

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


def test_written_files_and_folders_keep_the_umask_mode(tmp_path):
    from mwpgen.io import atomic_directory, atomic_write_text

    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.json", "{}\n")
        with atomic_directory(tmp_path / "d") as tmp:
            (tmp / "f").write_text("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640  # not mkstemp's 0600
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o750  # not mkdtemp's 0700


def test_a_resume_state_that_would_run_code_is_refused(tmp_path):
    """torch.load(weights_only=True): a state file cannot execute code when read."""
    import pickle

    import torch

    from mwpgen.resume import Checkpoints

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    torch.save({"fingerprint": "x", "evil": Payload()}, tmp_path / "state.pt")
    with pytest.raises(pickle.UnpicklingError):
        Checkpoints(tmp_path, "x", save_every=1).load()  # every trainer reads its state through this
    assert not (tmp_path / "pwned").exists()
