"""The marker of a seq2seq baseline that could not be trained (seq2seq-rnn + GloVe offline): its model folder holds
only NOT_RUN_FILE = {"not_run": reason}, which the generate and evaluate stages read to report the row as not run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mwpgen.io import DataFormatError, atomic_directory

NOT_RUN_FILE = "NOT_RUN.json"


def write_not_run(checkpoint_dir: str | os.PathLike, reason: str) -> Path:
    """Replace `checkpoint_dir` by a folder holding only NOT_RUN_FILE = {"not_run": reason}: DVC still gets its
    output, and no stale checkpoint of an earlier run survives beside the marker."""
    with atomic_directory(checkpoint_dir) as tmp:
        (tmp / NOT_RUN_FILE).write_text(json.dumps({"not_run": reason}, indent=2) + "\n", encoding="utf-8")
    return Path(checkpoint_dir)


def read_not_run(checkpoint_dir: str | os.PathLike) -> str | None:
    """The reason a baseline was not trained (its NOT_RUN_FILE), or None for an ordinary checkpoint folder."""
    path = Path(checkpoint_dir) / NOT_RUN_FILE
    if not path.is_file():
        return None
    try:
        reason = json.loads(path.read_text(encoding="utf-8"))["not_run"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataFormatError(path, f"not a not-run marker ({e})") from e
    return str(reason or "not run (no reason recorded)")
