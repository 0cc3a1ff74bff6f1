"""README's Prefect recipe on a loopback server: `prefect work-pool create mwpgen-local --type process` and
`prefect --no-prompt deploy --all` deploy every deployment of prefect.yaml (the Docker one is apart, in
prefect-docker.yaml); a deployment run that fails names its cause in its final state; the worker
(`python -m orchestration.worker`) stops on the first Ctrl-C, interrupting the run it holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a Prefect server, workers and flow-run processes: tens of seconds


def _prefect(env: dict, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "prefect", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def env(prefect_api, tmp_path):
    return {**os.environ, "PREFECT_API_URL": prefect_api, "MWPGEN_HOME": str(ROOT),
            "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _worker(env: dict, pool: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "orchestration.worker", "--pool", pool], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_state(flow_run_id, done, timeout_s: float = 180):
    from prefect.client.orchestration import get_client

    deadline = time.time() + timeout_s
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and done(run.state):
                return run
            assert time.time() < deadline, f"flow run stayed {run.state}"
            time.sleep(1)


def test_the_recipe_deploys_what_prefect_yaml_names_and_a_failed_run_names_its_cause(env):
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    assert _prefect(env, "work-pool", "create", "mwpgen-local", "--type", "process").returncode == 0
    proc = _prefect(env, "--no-prompt", "deploy", "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with get_client(sync_client=True) as client:
        names = {d.name for d in client.read_deployments()}
    assert {d["name"] for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]} <= names
    assert "mwpgen-fold-docker" not in names  # apart: its pool needs prefect-docker and Docker
    docker = yaml.safe_load((ROOT / "prefect-docker.yaml").read_text())
    assert [d["work_pool"]["name"] for d in docker["deployments"]] == ["mwpgen-docker"]

    worker = _worker(env, "mwpgen-local")
    try:
        run = run_deployment("pipeline/mwpgen-pipeline", parameters={"targets": ["spilt"]}, timeout=0)
        run = _wait_state(run.id, lambda s: s.is_final())
    finally:
        worker.send_signal(signal.SIGINT)
        worker.wait(timeout=60)
    assert run.state.is_failed()
    assert "unknown stage 'spilt' (did you mean split?)" in run.state.message


SLEEPY = """\
import time
from prefect import flow

@flow(name="sleepy")
def sleepy():
    print("sleeping", flush=True)
    time.sleep(120)
"""


def test_the_worker_stops_on_the_first_ctrl_c_with_its_run(env, tmp_path):
    from prefect.deployments import run_deployment

    (tmp_path / "sleepy.py").write_text(SLEEPY)
    (tmp_path / "prefect.yaml").write_text(yaml.safe_dump({
        "name": "sleepy", "pull": [{"prefect.deployments.steps.set_working_directory": {"directory": str(tmp_path)}}],
        "deployments": [{"name": "s", "entrypoint": "sleepy.py:sleepy",
                         "work_pool": {"name": "sleepy-pool", "work_queue_name": "default", "job_variables": {}}}]}))
    assert _prefect(env, "work-pool", "create", "sleepy-pool", "--type", "process").returncode == 0
    assert _prefect(env, "--no-prompt", "deploy", "--all", cwd=tmp_path).returncode == 0
    worker = _worker(env, "sleepy-pool")
    try:
        run = run_deployment("sleepy/s", timeout=0)
        _wait_state(run.id, lambda s: s.is_running())
        time.sleep(2)
        worker.send_signal(signal.SIGINT)
        start = time.time()
        worker.wait(timeout=60)
        assert time.time() - start < 30  # Prefect's own worker waited for the run: 120 s here, hours for a pipeline
    finally:
        if worker.poll() is None:
            worker.kill()
    run = _wait_state(run.id, lambda s: s.is_final(), timeout_s=60)
    assert not run.state.is_completed()
