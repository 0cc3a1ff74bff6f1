"""`dvc repro` with stages that do not depend on each other running side by side.

DVC reproduces one stage after another. A smoke run's stages are mostly imports, a JVM's start and a few short steps,
and one at a time they kept 1.2 of two cores busy (`/usr/bin/time`: 120 % CPU). DVC lets several `dvc repro`
processes share a project: it holds its repository lock only for its own bookkeeping, releases it while a stage's
command runs (dvc/stage/run.py, `unlocked_repo`), and guards the running stage's deps and outs with read/write locks
(dvc/rwlock.py). So every stage that may have to run is reproduced by a `dvc --wait-for-lock repro --single-item`
of its own (`--wait-for-lock`: wait while another process writes dvc.lock instead of failing), started once every
stage it depends on has finished, at most `jobs` at a time. DVC still decides whether a stage is stale and writes its
dvc.lock entry: this only decides when to ask it.

The plan is DVC's own (`plan_repro` over the same graph, the same targets): stages DVC finds stale now, and the
stages downstream of them, which may become stale as those run. Everything else is up to date and not started.

What it depends on, written against DVC 3.67 (pinned in pyproject.toml): `dvc.repo.reproduce`'s `collect_stages`,
`get_active_graph` and `plan_repro` (module functions, not DVC's documented API), `Stage.changed()` and `addressing`,
and the command line's `--wait-for-lock` and "Running stage '" line. If a DVC release renames one of these, `plan`
fails at the pipeline's start (tests/pipeline/test_parallel_repro.py checks the plan against `dvc repro`'s own choices)
and `--jobs 1` does not help: pin DVC back or replace the plan with `dvc repro`. What it pays: a smoke run two stages at
a time took 4 min 1 s against 5 min 54 s one at a time (a fresh-clone pair on a 2-core Intel Xeon,
studies/stage_overhead).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from orchestration.prefect_api import sigint_at_default
from orchestration.stage_reaper import StageReaper

RUNNING = "Running stage '"  # how DVC announces that it runs a stage's command (not skipping it)
# Lines every stage prints that say nothing about what it did: Prefect's run states and links, DVC's lock update and
# push hint (the pipeline pushes itself), progress bars, blank lines. `--verbose` shows them.
NOISE = re.compile(r"Beginning flow run '|View at https?://|Finished in state Completed\(\)|^Updating lock file "
                   r"'dvc\.lock'|^Use `dvc push` to send|\d+%\|.*\| *\d+/\d+ \[|^\s*$")
# CPython's own report of a crash: what a stage's Python prints when a Ctrl-C reaches it while it is still starting
# (importing `site`), before any handler of the stage can turn the interruption into its one line. A report opens
# with CRASH_START; its lines go on with CRASH_BODY (a frame, its source line, the exception) until one does not.
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


@dataclass
class Plan:
    """Stages (DVC addresses, upstream first) to hand to DVC, and the planned stages each one waits for."""
    stages: list[str]
    upstream: dict[str, set[str]]
    up_to_date: int = 0  # planned stages DVC found up to date with nothing stale upstream: not started

    def waiting_on(self, name: str) -> int:
        """How many planned stages depend on `name`, directly or not: the one more stages wait for starts first."""
        below, frontier = set(), {name}
        while frontier:
            frontier = {s for s in self.stages if self.upstream[s] & frontier} - below
            below |= frontier
        return len(below)


@dataclass
class Outcome:
    seconds: dict[str, float] = field(default_factory=dict)  # stages DVC ran, wall time of their `dvc repro`
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # the same stages' CPU time (DVC's and the stage's)
    unchanged: list[str] = field(default_factory=list)       # stages DVC found up to date after all
    failed: list[str] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)     # after a failure: left for the next run

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_started


def plan(root: Path, targets: Iterable[str] = (), force: bool = False) -> Plan:
    """What `dvc repro [--force] TARGETS` in `root` would reproduce, less the stages it would only find up to date."""
    from dvc.repo import Repo
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    # targets name stages as `dvc repro` in `root` reads them: relative to the working directory
    with contextlib.chdir(root), Repo(".") as repo, repo.lock:
        graph = get_active_graph(repo.index.graph)  # edges point from a stage to the stages it depends on
        steps = plan_repro(graph, collect_stages(repo, list(targets) or ["dvc.yaml"]))
        stale: set = set()
        for stage in steps:  # upstream first
            if force or any(up in stale for up in graph.successors(stage)) or stage.changed():
                stale.add(stage)
        kept = [s for s in steps if s in stale]
        return Plan([s.addressing for s in kept],
                    {s.addressing: {u.addressing for u in graph.successors(s) if u in stale} for s in kept},
                    up_to_date=len(steps) - len(kept))


def dvc_repro(force: bool = False, commit: bool = True) -> Callable[[str], list[str]]:
    """The command that reproduces one planned stage."""
    return lambda stage: [sys.executable, "-m", "dvc", "--wait-for-lock", "repro", "--single-item",
                          *(["--force"] if force else []), *([] if commit else ["--no-commit"]), stage]


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def run(plan: Plan, command: Callable[[str], list[str]], *, cwd: Path, env: dict, jobs: int,
        out: TextIO = sys.stdout, verbose: bool = True) -> Outcome:
    """Run `command(stage)` for every planned stage once the stages it waits for have succeeded, `jobs` at a time,
    each line of their output echoed behind its stage's name. After a failure no stage starts; those running finish
    (their work is kept). Interrupted (Ctrl-C, or SIGTERM made an exception), every running stage is interrupted as
    by a Ctrl-C, and what they print while stopping is echoed, but for a Python's own crash report (CrashReport: a stage
    interrupted while its interpreter starts). Not `verbose`: the NOISE lines are not echoed.
    Killed outright, its reaper does the same
    (orchestration/stage_reaper.py)."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    outcome, finished = Outcome(), queue.Queue()
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    relays: list[threading.Thread] = []
    waiting = sorted(plan.stages, key=plan.waiting_on, reverse=True)  # stable: DVC's order among equals
    succeeded: set[str] = set()
    echo = threading.Lock()
    stopping = threading.Event()  # the run was interrupted: the stages are being stopped

    def relay(stage: str, proc: subprocess.Popen) -> None:
        ran, crash = False, CrashReport()
        with proc.stdout:
            for line in proc.stdout:
                ran = ran or line.startswith(RUNNING)
                in_report = crash(line)  # every line, so that a report's start is seen
                if not verbose and NOISE.search(line) or stopping.is_set() and in_report:
                    continue
                with echo:
                    out.write(f"{stage} | {line}")
                    out.flush()
        try:  # its rusage: the CPU time of DVC and of the stage process DVC waited for
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode, cpu = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
        except ChildProcessError:  # already reaped while the run was being interrupted
            cpu = None
        finished.put((stage, proc.wait(), ran, cpu))

    def start(stage: str) -> None:
        # Its own process group: an interruption reaches DVC and the stage's command while the Prefect server they
        # report to still answers.
        proc = subprocess.Popen(command(stage), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True, preexec_fn=sigint_at_default)
        running[stage] = proc, time.time()
        reaper.started(proc.pid, stage)  # start_new_session: the group's id is the process's
        relays.append(threading.Thread(target=relay, args=(stage, proc), daemon=True))
        relays[-1].start()

    reaper = StageReaper(cwd)
    try:
        while waiting or running:
            if not outcome.failed:
                for stage in [s for s in waiting if plan.upstream[s] <= succeeded][: max(0, jobs - len(running))]:
                    waiting.remove(stage)
                    start(stage)
            if not running:
                break
            stage, returncode, ran, cpu = finished.get()
            proc, since = running.pop(stage)
            reaper.ended(proc.pid)
            if returncode != 0:
                outcome.failed.append(stage)
                continue
            succeeded.add(stage)
            if ran:
                outcome.seconds[stage] = round(time.time() - since, 1)
                outcome.cpu_seconds[stage] = round(cpu, 1)
            else:
                outcome.unchanged.append(stage)
    except BaseException:  # Ctrl-C, SIGTERM (orchestration/prefect_api.py): the stages stop first, as on a Ctrl-C
        stopping.set()
        for proc, _ in running.values():
            _signal_group(proc, signal.SIGINT)
        deadline = time.time() + 60
        for proc, _ in running.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        for thread in relays:  # what the stages printed while stopping (e.g. a checkpoint saved)
            thread.join(timeout=5)
        for proc, _ in running.values():
            reaper.ended(proc.pid)
        raise
    finally:
        reaper.close()
    outcome.not_started = [s for s in plan.stages if s in waiting]
    return outcome
