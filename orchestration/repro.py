"""`dvc repro` as the pipeline runs it: DVC's documented command in a subprocess, one stage after another.

- `dvc_repro_args`: the command line. `--force` with targets forces those stages only (`--single-item`): DVC's own
  `-f` would rerun every stage upstream of them too (the evaluator with `train_ours@...`).
- `unknown_targets`: targets that name no stage of `dvc stage list`, with close matches, before anything starts.
- `clone_lock`: one pipeline per clone; a second one is refused with the holder's pid (DVC would meet the first
  one's locks mid-run and advise removing .dvc/tmp/rwlock by hand).
- `Repro`: the running `dvc repro` (orchestration/dvc_command.py: it ends with the pipeline, even a killed one), its
  output line by line, split at DVC's "Running stage '...':" lines; stopped as by a Ctrl-C when the run is
  interrupted; a failure named by the stage's own one-line error.
"""

from __future__ import annotations

import difflib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestration import dvc_command

RUNNING = re.compile(r"^Running stage '(?P<stage>[^']+)':")
DVC_FAILED = re.compile(r"^ERROR: failed to reproduce '(?P<stage>[^']+)'")
# Lines every stage prints that say nothing about what it did: Prefect's run states and links, DVC's lock update and
# push hint (the pipeline pushes itself), progress bars, blank lines. `--verbose` shows them.
NOISE = re.compile(r"Beginning flow run '|View at https?://|Finished in state Completed\(\)"
                   r"|^(Generating|Updating) lock file 'dvc\.lock'|^Use `dvc push` to send"
                   r"|\d+%\|.*\| *\d+/\d+ \[|^\s*$")
# CPython's own report of a crash: what a stage's Python prints when a Ctrl-C reaches it while it is still starting
# (importing `site`), before any handler of the stage can turn the interruption into its one line.
CRASH_START = re.compile(r"^(Traceback \(most recent call last\):|Fatal Python error|Python runtime state"
                         r"|Current thread)")
CRASH_BODY = re.compile(r"^(  File |    |KeyboardInterrupt|\s*$)")


class CrashReport:
    """Tells, line by line, whether a line belongs to a Python crash report (CRASH_START, then CRASH_BODY lines):
    only those are dropped while a run stops, never a stage's own output that happens to be indented."""

    def __init__(self) -> None:
        self.inside = False

    def __call__(self, line: str) -> bool:
        self.inside = bool(CRASH_START.match(line)) or self.inside and bool(CRASH_BODY.match(line))
        return self.inside


def dvc_repro_args(targets: list[str] | None, force: bool = False, commit: bool = True) -> list[str]:
    """`dvc repro`'s arguments: everything stale (with `force`: everything), or the targets and what is stale
    upstream of them (with `force`: the targets alone, `--single-item`)."""
    targets = list(targets or [])
    return ["repro", *(["--force"] if force else []), *(["--single-item"] if force and targets else []),
            *([] if commit else ["--no-commit"]), *targets]


def stage_names(root: Path, env: dict | None = None) -> list[str] | None:
    """Every stage `dvc stage list` names in `root` (matrix stages expanded); None when DVC cannot list them (its own
    error then comes from `dvc repro`)."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=root, env=env,
                          capture_output=True, text=True)
    return proc.stdout.split() if proc.returncode == 0 else None


def unknown_targets(root: Path, targets: list[str], names: list[str]) -> list[str]:
    """One line for each target that names no stage (nor a matrix group such as `train`, nor a dvc.yaml file, nor
    `FILE:STAGE`), with the close matches."""
    known = set(names) | {n.split("@", 1)[0] for n in names}
    lines = []
    for target in targets:
        stage = target.rsplit(":", 1)[1] if ":" in target else target
        if target in known or stage in known or (root / target).is_file():
            continue
        close = difflib.get_close_matches(stage, sorted(known), n=3, cutoff=0.6)
        lines.append(f"unknown stage {target!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    return lines


class CloneBusy(RuntimeError):
    pass


def lock_file(root: Path) -> Path:
    return root / ".dvc" / "tmp" / "pipeline.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


_held: dict[Path, int] = {}  # lock file -> its open descriptor, while this process holds it


@contextmanager
def clone_lock(root: Path) -> Iterator[int]:
    """Hold this clone's pipeline lock (an flock on .dvc/tmp/pipeline.lock, re-entrant in one process); yields its
    descriptor, to be handed to `dvc repro` so that the lock lasts as long as DVC does. Held elsewhere: CloneBusy,
    naming the holder's pid."""
    path = lock_file(root)
    if path in _held:
        yield _held[path]
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise CloneBusy(describe_holder(path)) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid()}).encode(), 0)
    _held[path] = fd
    try:
        yield fd
    finally:
        del _held[path]
        os.close(fd)


def note_dvc_pid(root: Path, pid: int) -> None:
    """Record the running `dvc repro` beside the pipeline's pid in the lock file (it holds the lock too)."""
    fd = _held.get(lock_file(root))
    if fd is not None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "dvc_pid": pid}).encode(), 0)


def describe_holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        holder = {}
    pid, dvc_pid = holder.get("pid"), holder.get("dvc_pid")
    if pid and _alive(pid):
        return (f"another pipeline is running in this clone (pid {pid}): wait for it to end, or stop it with "
                f"`kill -INT {pid}`")
    if dvc_pid and _alive(dvc_pid):
        return (f"the `dvc repro` of an ended pipeline is still stopping its stage in this clone (pid {dvc_pid}); "
                "it ends within a minute")
    return f"another process holds {path} (no pid recorded)"


class Repro:
    """A running `dvc ARGS` (dvc_command.start) whose output is read line by line, a stage's lines after DVC's
    "Running stage" line. `stop` interrupts it as a Ctrl-C does and reads what it prints while stopping."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict, lock_fd: int | None = None,
                 echo: Callable[[str], None] = lambda line: None):
        self.echo = echo
        self.proc = dvc_command.start(args, cwd=cwd, env=env, pass_fds=(lock_fd,) if lock_fd is not None else ())
        note_dvc_pid(cwd, self.proc.pid)
        self.stage: str | None = None   # the stage whose lines are being read
        self.lines: list[str] = []      # its lines so far (DVC's own before the first stage)
        self.failed_stage: str | None = None
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.pending: str | None = None  # a "Running stage" line read, not yet handed out

    def next_stage(self) -> str | None:
        """Read on to the next stage DVC runs (None: DVC has ended); its "Running stage" line is its first."""
        if self.pending is None:
            for line in self.proc.stdout:
                if RUNNING.match(line):
                    self.pending = line
                    break
                self._take(line)
        if self.pending is None:
            self._ended()
            return None
        line, self.pending = self.pending, None
        self._ended()
        self.stage = RUNNING.match(line)["stage"]
        self.started[self.stage] = time.time()
        self.lines = []
        self._take(line)
        return self.stage

    def stage_lines(self) -> Iterator[str]:
        """The current stage's lines, to the next stage's start or DVC's end."""
        for line in self.proc.stdout:
            if RUNNING.match(line):
                self.pending = line
                return
            self._take(line)
            yield line

    def _take(self, line: str) -> None:
        self.lines.append(line)
        if m := DVC_FAILED.match(line):
            self.failed_stage = m["stage"]
        self.echo(line)

    def _ended(self) -> None:
        if self.stage is not None and self.stage not in self.seconds:
            self.seconds[self.stage] = round(time.time() - self.started[self.stage], 1)

    def wait(self) -> int:
        for line in self.proc.stdout:
            self._take(line)
        self._ended()
        return self.proc.wait()

    def cause(self) -> str:
        """Why the run failed, in one line: the stage's own `error: ...` line, else DVC's ERROR line."""
        own = [ln.strip() for ln in self.lines if ln.startswith("error: ")]
        if own:
            return own[-1].removeprefix("error: ").split("  (traceback: ")[0]
        dvc = [ln.strip() for ln in self.lines if ln.startswith("ERROR: ")]
        return dvc[-1].removeprefix("ERROR: ") if dvc else f"dvc exited with {self.proc.returncode}"

    def stop(self, timeout_s: float = dvc_command.GRACE_S + 10) -> None:
        """Interrupt DVC and its stage as a Ctrl-C does (the stage can save what it has), echo what they print while
        stopping (but a Python's own crash report), kill them if they are not done within `timeout_s`."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        crash = CrashReport()
        echo, self.echo = self.echo, (lambda line: None if crash(line) else echo(line))
        killer = threading.Timer(timeout_s, self._kill)
        killer.daemon = True
        killer.start()
        try:
            for line in self.proc.stdout:  # to its end: DVC and its stage have exited (or been killed)
                self._take(line)
        finally:
            killer.cancel()
            if self.proc.poll() is None:
                self._kill()
            self.proc.wait()

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
