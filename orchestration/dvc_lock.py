"""dvc.lock trimmed to the stages a run can touch while `dvc repro` runs, and whole again afterwards.

DVC loads and rewrites the whole dvc.lock, round trip in pure Python, around every stage it runs
(treeverse/dvc#10629): with every committed run's entries (74 stages, ~10,000 lines) that is a few seconds a stage.
Only the entries of the stages that dvc.yaml defines under the current params.yaml are ever read or written by a
`dvc repro` (`Lockfile.dump_stages` updates a stage's entry in place or appends it, and leaves the others as they
are), so `trimmed_lock` hands DVC just those and puts the others back on the way out, where they were: the result
is the file DVC would have written, byte for byte.

The untrimmed file waits in `.dvc/tmp/dvc.lock.untrimmed` meanwhile; a run killed before it could put the entries
back (SIGKILL, power loss) leaves it there, and the next `trimmed_lock` restores it first. DVC stages dvc.lock in git
after each stage here (`core.autostage`); the whole file is staged again once it is whole.
"""

from __future__ import annotations

import fcntl
import re
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml

EMPTY = "schema: '2.0'\n"  # what DVC reads as a lock with no stage yet (a `stages:` with nothing under it it cannot)
HEADER = EMPTY + "stages:\n"
UNTRIMMED = ".dvc/tmp/dvc.lock.untrimmed"
TRIM_GUARD = ".dvc/tmp/dvc.lock.trim"  # flock held while a run's lock is trimmed
STAGED_BEFORE = ".dvc/tmp/dvc.lock.staged-before"  # git's index entry for dvc.lock as the run began
ENTRY = re.compile(r"^  (?! )(.+):\n", re.M)  # a stage's key: two spaces, its name, a colon, nothing after


def split_entries(text: str) -> dict[str, str] | None:
    """Stage name -> its entry's text (key line included), in the file's order; None for a file not laid out as DVC
    writes it (a top-level key besides `schema` and `stages`, flow style, ...), which is then left alone."""
    if text == EMPTY:
        return {}
    if not text.startswith(HEADER):
        return None
    body = text[len(HEADER):]
    starts = list(ENTRY.finditer(body))
    if not starts or starts[0].start() != 0:
        return None
    entries = {}
    for match, after in zip(starts, [*starts[1:], None]):
        name = match.group(1).strip("'\"")
        entries[name] = body[match.start():after.start() if after else len(body)]
    if any(not re.fullmatch(r"(    .*\n|\n)*", entry.split("\n", 1)[1]) for entry in entries.values()):
        return None  # something at the top level after the stages
    loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if set(loaded) != {"schema", "stages"} or list(loaded["stages"]) != list(entries):
        return None
    return entries


def merged(untrimmed: str, trimmed: str) -> str:
    """The untrimmed lock with the entries of the trimmed one (as DVC left it) in their places; entries DVC added
    come last, in the order it added them (as `Lockfile.dump_stages` would have placed them)."""
    before, after = split_entries(untrimmed), split_entries(trimmed) if trimmed else {}
    if before is None or after is None:
        raise ValueError("dvc.lock is not laid out as DVC writes it: cannot merge the trimmed entries back")
    entries = {**before, **after}  # dict update: keys already there keep their place, new ones go last
    return HEADER + "".join(entries.values()) if entries else EMPTY


def stage_names(root: Path) -> set[str]:
    """The stages dvc.yaml defines under the current params.yaml (its matrices expanded)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {stage.name for stage in repo.index.stages if getattr(stage, "name", None)}


def staged(root: Path) -> str | None:
    """git's index entry for dvc.lock ("" if none), None outside a git work tree."""
    proc = subprocess.run(["git", "ls-files", "-s", "--", "dvc.lock"], cwd=root, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def restore(root: Path) -> bool:
    """Put back the entries set aside (by this run, or by one killed before it could); whether there were any. If
    DVC staged dvc.lock meanwhile (`core.autostage`, this project's setting), the whole file is staged in its place,
    as DVC would have staged it: a `git commit` never records the trimmed one."""
    lock, untrimmed, staged_before = root / "dvc.lock", root / UNTRIMMED, root / STAGED_BEFORE
    if not untrimmed.exists():
        return False
    trimmed = lock.read_text() if lock.exists() else ""
    lock.write_text(merged(untrimmed.read_text(), trimmed))
    before = staged_before.read_text() if staged_before.exists() else None
    if before is not None and staged(root) not in (None, before):
        subprocess.run(["git", "add", "--", "dvc.lock"], cwd=root, check=True, capture_output=True)
    staged_before.unlink(missing_ok=True)
    untrimmed.unlink()
    return True


@contextmanager
def trimmed_lock(root: Path, names: set[str] | None = None) -> Iterator[int]:
    """dvc.lock with only the entries of `names` (default: `stage_names(root)`) while inside; yields how many entries
    were set aside (0: nothing trimmed: no lock yet, one laid out otherwise, or another run in this project holds
    it, whose `dvc repro` then refuses this one's as DVC does)."""
    guard = root / TRIM_GUARD
    guard.parent.mkdir(parents=True, exist_ok=True)
    with open(guard, "w") as held:
        try:  # released by the kernel however the holder ends, so a killed run's entries are ours to put back
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield 0
            return
        if restore(root):
            print(f"dvc.lock: put back the entries a killed run had set aside ({UNTRIMMED})", flush=True)
        lock = root / "dvc.lock"
        text = lock.read_text() if lock.exists() else None
        entries = split_entries(text) if text is not None else None
        if names is None and entries:
            try:
                names = stage_names(root)
            except Exception:  # noqa: BLE001 -- a dvc.yaml DVC cannot read: its own `dvc repro` says why
                entries = None
        kept = {name: entry for name, entry in (entries or {}).items() if name in names}
        if not entries or len(kept) == len(entries):
            yield 0
            return
        (root / STAGED_BEFORE).write_text(staged(root) or "")
        (root / UNTRIMMED).write_text(text)  # from here on a kill loses nothing
        lock.write_text(HEADER + "".join(kept.values()) if kept else EMPTY)
        try:
            yield len(entries) - len(kept)
        finally:
            restore(root)
