"""orchestration/warm_python.py: a stage forked from the warm Python behaves as a stage process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestration.warm_python import SOCKET_ENV, client_script, warm_stages, why_cold

# A stand-in stage module: what it saw of its process, then the ending its first argument asks for.
PROBE = """\
import json, os, sys, time
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "x": os.environ.get("MWPGEN_X"),
                  "warm": "torch" in sys.modules, "pid": os.getpid(), "pgid": os.getpgid(0), "main": __name__,
                  "stdin": sys.stdin.read()}), flush=True)
sys.stderr.write("to stderr\\n")
how = sys.argv[1] if len(sys.argv) > 1 else "0"
if how == "raise":
    raise ValueError("boom")
if how == "message":
    sys.exit("a message")
if how == "sleep":
    open("sleeping", "w").write(str(os.getpid()))
    time.sleep(60)
if how == "torch":  # an OpenMP parallel region in a forked child: must neither hang nor lose its threads
    import torch
    a = torch.randn(1500, 1500)
    print("threads", torch.get_num_threads(), float((a @ a).abs().sum()) > 0, flush=True)
    how = "0"
sys.exit(int(how))
"""


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A project directory holding flows/probe.py, and a warm Python serving it (ready before the tests run)."""
    project = tmp_path_factory.mktemp("warm")
    (project / "flows").mkdir()
    (project / "flows" / "__init__.py").write_text("")
    (project / "flows" / "probe.py").write_text(PROBE)
    with warm_stages(_env(), wait_s=120) as added:
        assert Path(added[SOCKET_ENV]).exists(), "the warm Python did not start listening"
        yield project


def _env(**changes: str) -> dict:
    """This process's environment, less the variable pytest changes for every test (a difference in it would make
    every stage run cold)."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}, **changes}


def _python(project: Path, *args: str, env: dict | None = None, stdin: str = "", timeout: float = 120):
    return subprocess.run(["python", *args], cwd=project, env=_env(**(env or {})), input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _seen(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[0])


def test_a_stage_runs_forked_with_its_own_arguments_directory_environment_and_streams(warm):
    proc = _python(warm, "-m", "flows.probe", "0", env={"MWPGEN_X": "stage"}, stdin="input")
    seen = _seen(proc)
    assert proc.returncode == 0 and seen["warm"]  # torch was imported before the stage started: it was forked
    assert seen["argv"] == ["0"] and seen["cwd"] == str(warm) and seen["x"] == "stage" and seen["stdin"] == "input"
    assert seen["main"] == "__main__" and seen["pgid"] == seen["pid"]  # the leader of a process group of its own
    assert proc.stderr == "to stderr\n"


@pytest.mark.parametrize("how, code, stderr", [("3", 3, None), ("raise", 1, "ValueError: boom"),
                                               ("message", 1, "a message")])
def test_a_stage_ends_as_python_would_end_it(warm, how, code, stderr):
    proc = _python(warm, "-m", "flows.probe", how)
    assert _seen(proc)["warm"] and proc.returncode == code
    if stderr:
        assert proc.stderr.rstrip().endswith(stderr)


def test_torch_threads_work_in_a_forked_stage(warm):
    proc = _python(warm, "-m", "flows.probe", "torch", timeout=60)
    assert proc.returncode == 0 and _seen(proc)["warm"]
    cold = subprocess.run([sys.executable, "-m", "flows.probe", "torch"], cwd=warm, env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert not _seen(cold)["warm"]
    assert proc.stdout.splitlines()[1] == cold.stdout.splitlines()[1]  # as many threads as a fresh process


def test_what_the_warm_python_cannot_run_exactly_runs_cold(warm):
    differs = _python(warm, "-m", "flows.probe", env={"OMP_NUM_THREADS": "1"})  # read when torch loads OpenMP
    assert differs.returncode == 0 and not _seen(differs)["warm"]
    plain = _python(warm, "-c", "import sys; print('torch' in sys.modules)")
    assert plain.returncode == 0 and plain.stdout.strip() == "False"


def test_an_interrupt_reaches_the_stage_and_a_killed_client_takes_the_stage_with_it(warm):
    for sent in (signal.SIGINT, signal.SIGKILL):
        (warm / "sleeping").unlink(missing_ok=True)
        client = subprocess.Popen(["python", "-m", "flows.probe", "sleep"], cwd=warm, env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not (warm / "sleeping").exists() and time.time() < deadline:
            time.sleep(0.1)
        stage = int((warm / "sleeping").read_text())
        client.send_signal(sent)
        _, err = client.communicate(timeout=60)
        assert client.returncode == -sent  # as a stage of its own: ended by the signal
        if sent == signal.SIGINT:
            assert "KeyboardInterrupt" in err
        deadline = time.time() + 10
        while Path(f"/proc/{stage}").exists() and time.time() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{stage}").exists(), f"stage process {stage} outlived its client ({sent!r})"


def test_without_a_warm_python_the_client_runs_the_real_one(tmp_path):
    client = tmp_path / "python"
    client.write_text(client_script(sys.executable))
    client.chmod(0o755)
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "__init__.py").write_text("")
    (tmp_path / "flows" / "probe.py").write_text(PROBE)
    proc = subprocess.run([str(client), "-m", "flows.probe", "4"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, SOCKET_ENV: str(tmp_path / "no-socket")})
    assert proc.returncode == 4 and _seen(proc)["argv"] == ["4"]


def test_only_per_stage_variables_may_differ():
    imported_under = {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE", "PREFECT_API_URL": "http://a"}
    stage = {**imported_under, "PREFECT_API_URL": "http://b", "MWPGEN_PARENT_RUN_ID": "r", "DVC_STAGE": "split",
             "PWD": "/p", "SHLVL": "2"}
    assert why_cold(["-m", "flows.split"], stage, imported_under) is None
    assert "OMP_WAIT_POLICY" in why_cold(["-m", "flows.split"], {**stage, "OMP_WAIT_POLICY": "ACTIVE"},
                                         imported_under)
    assert "HF_HUB_OFFLINE" in why_cold(["-m", "flows.split"], {**stage, "HF_HUB_OFFLINE": "0"}, imported_under)
    assert why_cold(["-m", "dvc"], stage, imported_under) and why_cold(["script.py"], stage, imported_under)
