"""orchestration/parallel_repro.py: DVC's plan, stages side by side once what they depend on is done, DVC's lock."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from orchestration.parallel_repro import Plan, dvc_repro, plan, run

ROOT = Path(__file__).resolve().parents[2]

# a -> (b, c) -> d; each step notes when it started and ended (times/, not tracked by DVC) and takes a second.
STEP = """\
import sys, time
from pathlib import Path
name, deps = sys.argv[1], sys.argv[2:]
Path("times").mkdir(exist_ok=True)
start = time.time()
time.sleep(1.0)
Path(f"{name}.txt").write_text(name + "".join(Path(d).read_text() for d in deps))
Path("times", name).write_text(f"{start} {time.time()}")
"""
STAGES = """\
stages:
  a: {cmd: python step.py a, outs: [a.txt]}
  b: {cmd: python step.py b a.txt, deps: [a.txt], outs: [b.txt]}
  c: {cmd: python step.py c a.txt, deps: [a.txt], params: [size], outs: [c.txt]}
  d: {cmd: python step.py d b.txt c.txt, deps: [b.txt, c.txt], outs: [d.txt]}
"""


def _dvc(repo: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, check=True, capture_output=True, text=True)


def _project(repo: Path) -> Path:
    repo.mkdir()
    _dvc(repo, "init", "-q", "--no-scm")
    (repo / "step.py").write_text(STEP)
    (repo / "dvc.yaml").write_text(STAGES)
    (repo / "params.yaml").write_text("size: 1\n")
    return repo


def _times(repo: Path, name: str) -> tuple[float, float]:
    start, end = (repo / "times" / name).read_text().split()
    return float(start), float(end)


def _env() -> dict:
    # the stages' `python` is this interpreter (its DVC and yaml), as scripts/run.sh would have it
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def test_independent_stages_run_side_by_side_and_the_lock_is_the_one_dvc_repro_writes(tmp_path):
    plain, parallel = _project(tmp_path / "plain"), _project(tmp_path / "parallel")
    _dvc(plain, "repro", "-q")

    planned = plan(parallel)
    assert planned.stages == ["a", "b", "c", "d"] and planned.up_to_date == 0
    assert planned.upstream == {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}}
    out = io.StringIO()
    outcome = run(planned, dvc_repro(), cwd=parallel, env=_env(), jobs=2, out=out)
    assert outcome.ok and sorted(outcome.seconds) == ["a", "b", "c", "d"], out.getvalue()
    assert sorted(outcome.cpu_seconds) == ["a", "b", "c", "d"] and all(t > 0 for t in outcome.cpu_seconds.values())
    (b_start, b_end), (c_start, c_end) = _times(parallel, "b"), _times(parallel, "c")
    assert b_start < c_end and c_start < b_end  # side by side
    assert _times(parallel, "a")[1] < min(b_start, c_start) and _times(parallel, "d")[0] > max(b_end, c_end)
    assert "b | Running stage 'b':" in out.getvalue().splitlines()
    assert (parallel / "d.txt").read_text() == "dbaca"
    lock = lambda repo: yaml.safe_load((repo / "dvc.lock").read_text())  # noqa: E731 — a one-line local helper
    assert lock(parallel) == lock(plain)

    assert plan(parallel).stages == [] and plan(parallel).up_to_date == 4
    (parallel / "params.yaml").write_text("size: 2\n")
    assert plan(parallel).stages == ["c", "d"]  # c is stale, d may become so; a and b are up to date
    assert plan(parallel, ["b"], force=True).stages == ["a", "b"]


def test_a_failed_stage_stops_what_waits_for_it_and_nothing_new_starts(tmp_path):
    planned = Plan(["a", "b", "c", "d"], {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
    scripts = {"a": "print('a done')", "b": "import sys; sys.exit('b broke')",
               "c": "import time; time.sleep(1); print('c done')", "d": "print('d ran')"}
    out = io.StringIO()
    outcome = run(planned, lambda stage: [sys.executable, "-c", scripts[stage]], cwd=tmp_path, env=dict(os.environ),
                  jobs=2, out=out)
    assert outcome.failed == ["b"] and outcome.not_started == ["d"] and not outcome.ok
    assert "c | c done" in out.getvalue() and "b | b broke" in out.getvalue() and "d ran" not in out.getvalue()
    assert outcome.unchanged == ["a", "c"]  # no "Running stage" line: DVC would have found them up to date


def test_stages_wait_their_turn_and_the_one_more_stages_wait_for_starts_first(tmp_path):
    planned = Plan(["x", "y", "z"], {"x": set(), "y": set(), "z": {"y"}})
    assert [planned.waiting_on(s) for s in planned.stages] == [0, 1, 0]
    out = io.StringIO()
    script = "import sys, time; print(sys.argv[1], time.time(), flush=True); time.sleep(0.3)"
    outcome = run(planned, lambda stage: [sys.executable, "-c", script, stage], cwd=tmp_path, env=dict(os.environ),
                  jobs=1, out=out)
    assert outcome.ok
    started = [line.split(" | ")[0] for line in out.getvalue().splitlines()]
    assert started == ["y", "x", "z"] or started == ["y", "z", "x"]
    times = sorted(float(line.split()[-1]) for line in out.getvalue().splitlines())
    assert all(later - earlier >= 0.3 for earlier, later in zip(times, times[1:]))  # one at a time


def test_at_least_one_stage_at_a_time(tmp_path):
    with pytest.raises(ValueError, match="jobs must be at least 1, not 0"):
        run(Plan(["a"], {"a": set()}), lambda stage: ["true"], cwd=tmp_path, env=dict(os.environ), jobs=0)


STAND_IN_STAGE = """
import os, time
try:  # the pid, printed inside the try: the test signals as soon as it reads it
    print(os.getpid(), flush=True)
    time.sleep(300)
except KeyboardInterrupt:
    print("stage interrupted", flush=True)
    raise
"""

PIPELINE = """
import os, signal, sys
from pathlib import Path
from orchestration.prefect_api import _sigterm_as_exit
from orchestration.parallel_repro import Plan, run
signal.signal(signal.SIGTERM, _sigterm_as_exit)
if sys.argv[2] == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
run(Plan(["a", "b"], {"a": set(), "b": set()}), lambda stage: [sys.executable, sys.argv[1]], cwd=Path.cwd(),
    env=dict(os.environ), jobs=2)
"""


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_an_interrupted_pipeline_stops_its_running_stages_first(tmp_path, sigint):
    """SIGTERM (as `shared_api` turns it into an exit) while two stages run: each -- a sleeping stand-in for `dvc
    repro` -- is interrupted as by a Ctrl-C (KeyboardInterrupt: it can save what it has) and waited for before the
    pipeline process goes on to stop its server; nothing is left running. Also when the pipeline was started with
    SIGINT ignored, as a script's background job is."""
    (tmp_path / "stage.py").write_text(STAND_IN_STAGE)
    proc = subprocess.Popen([sys.executable, "-c", PIPELINE, str(tmp_path / "stage.py"), sigint], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stage_pids = [int(proc.stdout.readline().split(" | ")[1]) for _ in range(2)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=90) == 128 + signal.SIGTERM
    out = proc.stdout.read()
    assert out.count("stage interrupted") == 2
    # what each stopping stage prints is echoed, but not the traceback its Python prints for the interruption
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    for pid in stage_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_killed_pipeline_takes_its_running_stages_with_it(tmp_path):
    """SIGKILL gives the pipeline no chance to stop anything: its reaper, seeing it gone, interrupts each running
    stage as a Ctrl-C does (it can save what it has), and a later run that starts meanwhile names them by pid."""
    from orchestration.stage_reaper import describe, leftover_stages

    (tmp_path / "stage.py").write_text(STAND_IN_STAGE.replace('print("stage interrupted"',
                                                              'open("interrupted", "a").write("x"); print("x"'))
    proc = subprocess.Popen([sys.executable, "-c", PIPELINE, str(tmp_path / "stage.py"), "default"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    stage_pids = [int(proc.stdout.readline().split(" | ")[1]) for _ in range(2)]
    (tmp_path / ".dvc").mkdir(exist_ok=True)
    listed = leftover_stages(tmp_path)
    assert sorted(listed) == sorted(os.getpgid(pid) for pid in stage_pids)
    assert all(f"(pid {pgid}; stop it with: kill -INT -{pgid})" in describe(listed) for pgid in listed)
    proc.kill()
    proc.wait(timeout=10)
    assert all(_gone(pid, timeout_s=20) for pid in stage_pids)
    assert (tmp_path / "interrupted").read_text() == "xx"  # a Ctrl-C, not a kill: each could save its work
    assert leftover_stages(tmp_path) == {}


def test_a_quiet_run_echoes_what_the_stages_did_not_their_noise(tmp_path):
    noisy = ("print(\"12:00:00.000 | INFO    | Task run 't-1' - Finished in state Completed()\"); print(); "
             "print('Use `dvc push` to send your updates to remote storage.'); "
             "print('Loading weights: 100%|##########| 272/272 [00:00<00:00, 23914.70it/s]'); "
             "print(\"12:00:01.000 | INFO    | Flow run 'f' - arithmetic: 1492 problems, 1492 kept\")")
    for verbose, lines in ((False, 1), (True, 5)):
        out = io.StringIO()
        run(Plan(["a"], {"a": set()}), lambda stage: [sys.executable, "-c", noisy], cwd=tmp_path,
            env=dict(os.environ), jobs=1, out=out, verbose=verbose)
        assert len(out.getvalue().splitlines()) == lines
        assert "a | 12:00:01.000 | INFO    | Flow run 'f' - arithmetic: 1492 problems, 1492 kept" in out.getvalue()


KILLED_PIPELINE = """
import os, sys
from pathlib import Path
from orchestration.parallel_repro import dvc_repro, plan, run
run(plan(Path.cwd()), dvc_repro(), cwd=Path.cwd(), env=dict(os.environ), jobs=1)
"""
SLOW_STEP = """
import os, sys, time
from pathlib import Path
Path("slow.pid").write_text(str(os.getpid()))
time.sleep(120)
Path("slow.txt").write_text("done")
"""


@pytest.mark.slow
def test_a_pipeline_killed_mid_stage_leaves_no_stage_running_and_dvc_lock_whole(tmp_path):
    """SIGKILL of the pipeline while a real `dvc repro` runs a stage, in a git project with DVC's autostage: the
    stage's process ends within the reaper's grace period, and dvc.lock is neither cut nor staged cut."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _dvc(repo, "init", "-q")
    _dvc(repo, "config", "core.autostage", "true")
    (repo / "step.py").write_text(STEP)
    (repo / "slow.py").write_text(SLOW_STEP)
    (repo / "dvc.yaml").write_text(STAGES + "  slow: {cmd: python slow.py, deps: [d.txt], outs: [slow.txt]}\n")
    (repo / "params.yaml").write_text("size: 1\n")
    _dvc(repo, "repro", "-q", "d")
    def git(*a):
        return subprocess.run(["git", *a], cwd=repo, capture_output=True, text=True, check=True).stdout
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "four stages done")
    lock_before = (repo / "dvc.lock").read_text()

    proc = subprocess.Popen([sys.executable, "-c", KILLED_PIPELINE], cwd=repo, env={**_env(), "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (repo / "slow.pid").exists() and time.time() < deadline:
        time.sleep(0.2)
    stage_pid = int((repo / "slow.pid").read_text())
    proc.kill()
    proc.wait(timeout=10)
    assert _gone(stage_pid, timeout_s=45)
    assert (repo / "dvc.lock").read_text() == lock_before
    assert git("diff", "--cached", "--stat") == ""  # nothing staged, let alone a cut-down lock


def test_only_a_python_crash_report_is_taken_for_one_never_a_stages_indented_output():
    """While a run stops, CPython's crash report of a stage interrupted as it starts is dropped (CrashReport); a
    stage's own lines that start with spaces, before or after such a report, are not."""
    from orchestration.parallel_repro import CrashReport

    lines = ["    an indented table row of the stage\n",
             "Traceback (most recent call last):\n", '  File "<frozen site>", line 1, in <module>\n',
             "    import site\n", "KeyboardInterrupt\n",
             "stage says: stopped\n", "    its indented detail\n"]
    crash = CrashReport()
    assert [crash(line) for line in lines] == [False, True, True, True, True, False, False]
