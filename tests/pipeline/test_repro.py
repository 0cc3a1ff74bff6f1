"""orchestration/repro.py and dvc_command.py: the pipeline's `dvc repro` (DVC's own command in a subprocess), its
stages' output, a failure named by the stage's error, an interruption or a kill that stops the stage as a Ctrl-C
does with dvc.lock whole and nothing staged, one pipeline per clone."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestration.repro import (
    NOISE,
    CloneBusy,
    CrashReport,
    Repro,
    clone_lock,
    dvc_repro_args,
    lock_file,
    unknown_targets,
)

ROOT = Path(__file__).resolve().parents[2]

STEP = """\
import sys
from pathlib import Path
name, deps = sys.argv[1], sys.argv[2:]
print(f"made {name}")
Path(f"{name}.txt").write_text(name + "".join(Path(d).read_text() for d in deps))
"""
# A stage that waits; interrupted (KeyboardInterrupt: a Ctrl-C) it notes it, as a training saves its checkpoint.
SLOW = """\
import os, sys, time
from pathlib import Path
Path("slow.pid").write_text(str(os.getpid()))
try:
    time.sleep(120)
except KeyboardInterrupt:
    Path("interrupted").write_text("yes")
    print("slow: interrupted, checkpoint saved", flush=True)
    sys.exit(130)
Path("slow.txt").write_text("done")
"""
FAILING = "import sys\nprint('error: the stage broke on line 3  (traceback: MWPGEN_DEBUG=1)')\nsys.exit(1)\n"
STAGES = """\
stages:
  a: {cmd: python step.py a, deps: [step.py], outs: [a.txt]}
  b: {cmd: python step.py b a.txt, deps: [a.txt], outs: [b.txt]}
"""


def _env() -> dict:
    # the stages' `python` is this interpreter, as scripts/run.sh would have it
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _project(repo: Path, extra: str = "") -> Path:
    """A git + DVC project with DVC's autostage on (as this project), stages a -> b run and committed."""
    repo.mkdir()
    _git(repo, "init", "-q")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "config", "core.autostage", "true"], cwd=repo, check=True)
    (repo / "step.py").write_text(STEP)
    (repo / "slow.py").write_text(SLOW)
    (repo / "failing.py").write_text(FAILING)
    (repo / "dvc.yaml").write_text(STAGES + extra)
    return repo


def _gone(pid: int, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.time() + timeout_s
    while not path.exists():
        assert time.time() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_force_with_targets_forces_those_stages_only():
    assert dvc_repro_args(None) == ["repro"]
    assert dvc_repro_args(None, force=True) == ["repro", "--force"]
    assert dvc_repro_args(["train_ours@arithmetic-0"], force=True) == [
        "repro", "--force", "--single-item", "train_ours@arithmetic-0"]  # not the evaluator upstream of it
    assert dvc_repro_args(["split"], commit=False) == ["repro", "--no-commit", "split"]


def test_an_unknown_target_is_named_with_close_matches(tmp_path):
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    names = ["download", "split", "train@gpt-arithmetic-0", "train_ours@arithmetic-0"]
    assert unknown_targets(tmp_path, ["split", "train", "dvc.yaml", "dvc.yaml:split", "train@gpt-arithmetic-0"],
                           names) == []
    bad = unknown_targets(tmp_path, ["spilt", "no_such_stage"], names)
    assert bad == ["unknown stage 'spilt' (did you mean split?)", "unknown stage 'no_such_stage'"]


def test_stages_are_read_one_by_one_and_a_failure_is_named_by_the_stages_own_error(tmp_path):
    repo = _project(tmp_path / "repo", "  c: {cmd: python failing.py, deps: [b.txt], outs: [c.txt]}\n")
    echoed = io.StringIO()
    repro = Repro(["repro"], cwd=repo, env=_env(), echo=echoed.write)
    seen = {}
    while (name := repro.next_stage()) is not None:
        seen[name] = list(repro.stage_lines())
    assert repro.wait() != 0
    assert list(seen) == ["a", "b", "c"]
    assert "made a\n" in seen["a"] and "made b\n" in seen["b"]
    assert repro.failed_stage == "c" and repro.cause() == "the stage broke on line 3"
    assert "Running stage 'a':" in echoed.getvalue()
    assert set(repro.seconds) == {"a", "b", "c"}


def test_a_quiet_run_hides_the_noise_lines_only():
    noise = ["12:00:00.000 | INFO    | Task run 't-1' - Finished in state Completed()\n", "\n",
             "Use `dvc push` to send your updates to remote storage.\n", "Updating lock file 'dvc.lock'\n",
             "Generating lock file 'dvc.lock'\n", "Loading weights: 100%|##########| 272/272 [00:00<00:00, 9.70it/s]\n"]
    assert all(NOISE.search(line) for line in noise)
    assert not NOISE.search("12:00:01.000 | INFO    | Flow run 'f' - arithmetic: 1492 problems, 1492 kept\n")
    assert not NOISE.search("Running stage 'split':\n")


def test_only_a_python_crash_report_is_taken_for_one_never_a_stages_indented_output():
    lines = ["    an indented table row of the stage\n",
             "Traceback (most recent call last):\n", '  File "<frozen site>", line 1, in <module>\n',
             "    import site\n", "KeyboardInterrupt\n",
             "stage says: stopped\n", "    its indented detail\n"]
    crash = CrashReport()
    assert [crash(line) for line in lines] == [False, True, True, True, True, False, False]


def test_an_interrupted_run_stops_its_stage_as_a_ctrl_c_does_and_dvc_lock_stays_whole(tmp_path):
    repo = _project(tmp_path / "repo", "  slow: {cmd: python slow.py, deps: [b.txt], outs: [slow.txt]}\n")
    subprocess.run([sys.executable, "-m", "dvc", "repro", "-q", "b"], cwd=repo, env=_env(), check=True)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a and b done")
    lock_before = (repo / "dvc.lock").read_text()
    echoed = io.StringIO()
    repro = Repro(["repro"], cwd=repo, env=_env(), echo=echoed.write)
    assert repro.next_stage() == "slow"
    _wait_for(repo / "slow.pid")
    repro.stop()
    assert repro.proc.returncode != 0
    assert (repo / "interrupted").read_text() == "yes"  # a Ctrl-C, not a kill: it could save its work
    assert "slow: interrupted, checkpoint saved" in echoed.getvalue()
    assert (repo / "dvc.lock").read_text() == lock_before
    assert _git(repo, "diff", "--cached", "--stat") == ""


KILLED_PIPELINE = """
import os, sys, time
from pathlib import Path
from orchestration.repro import Repro, clone_lock
repo = Path(sys.argv[1])
with clone_lock(repo) as fd:
    repro = Repro(["repro"], cwd=repo, env=dict(os.environ), lock_fd=fd)
    while repro.next_stage() is not None:
        for line in repro.stage_lines():
            pass
"""


def test_a_killed_pipeline_takes_its_stage_with_it_and_leaves_dvc_lock_whole(tmp_path):
    """SIGKILL of the pipeline while `dvc repro` runs a stage, in a git project with DVC's autostage: the kernel
    tells DVC (dvc_command.py), which interrupts the stage as a Ctrl-C does; it ends, and dvc.lock is neither cut
    nor staged cut. Until DVC has ended, a second pipeline is refused, naming the stopping DVC's pid."""
    repo = _project(tmp_path / "repo", "  slow: {cmd: python slow.py, deps: [b.txt], outs: [slow.txt]}\n")
    subprocess.run([sys.executable, "-m", "dvc", "repro", "-q", "b"], cwd=repo, env=_env(), check=True)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a and b done")
    lock_before = (repo / "dvc.lock").read_text()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_PIPELINE, str(repo)], cwd=ROOT,
                            env={**_env(), "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for(repo / "slow.pid")
    stage_pid = int((repo / "slow.pid").read_text())
    with pytest.raises(CloneBusy, match=f"another pipeline is running in this clone \\(pid {proc.pid}\\)"):
        with clone_lock(repo):
            pass
    dvc_pid = json.loads(lock_file(repo).read_text())["dvc_pid"]
    proc.kill()
    proc.wait(timeout=10)
    assert _gone(stage_pid, timeout_s=45)
    assert (repo / "interrupted").read_text() == "yes"
    assert _gone(dvc_pid, timeout_s=45)
    assert (repo / "dvc.lock").read_text() == lock_before
    assert _git(repo, "diff", "--cached", "--stat") == ""  # nothing staged, let alone a cut-down lock
    with clone_lock(repo):  # free again
        pass


def test_a_second_pipeline_in_one_clone_is_refused_with_the_holders_pid(tmp_path):
    (tmp_path / ".dvc").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from orchestration.repro import clone_lock\n"
                               "with clone_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n"
                               "    time.sleep(60)\n", str(tmp_path)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(CloneBusy) as e:
            with clone_lock(tmp_path):
                pass
        assert f"(pid {holder.pid})" in str(e.value) and f"kill -INT {holder.pid}" in str(e.value)
    finally:
        holder.kill()
        holder.wait()
    with clone_lock(tmp_path):  # the holder gone, the lock is free (no stale file to remove by hand)
        with clone_lock(tmp_path):  # re-entrant in one process
            pass
