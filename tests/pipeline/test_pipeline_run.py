"""`python -m orchestration.pipeline` on a scratch DVC project: each stage DVC runs is a task run of the pipeline's
flow run with the stage's output as its log, a failure names the stage and its error in the run's final state, a
Ctrl-C exits 130; bad targets, an unwritable MLflow store and a busy clone are refused in one line, exit 2, before
Prefect starts."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline.test_repro import _env, _project, _wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A DVC project (stages a -> b, and c / slow after b) with this project's params.yaml, as the pipeline's root."""
    import orchestration.pipeline as pipeline_cli

    repo = _project(tmp_path / "repo", "  c: {cmd: python failing.py, deps: [b.txt], outs: [c.txt]}\n"
                                       "  slow: {cmd: python slow.py, deps: [b.txt], outs: [slow.txt]}\n")
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    monkeypatch.setattr(pipeline_cli, "PROJECT_ROOT", repo)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("PATH", _env()["PATH"])
    pipeline_cli._checked.clear()
    return repo


def _main(monkeypatch, *argv: str) -> None:
    import orchestration.pipeline as pipeline_cli

    monkeypatch.setattr(pipeline_cli, "shared_api", lambda: pytest.fail("the Prefect server started"))
    monkeypatch.setattr("sys.argv", ["orchestration.pipeline", *argv])
    pipeline_cli.main()


def test_an_unknown_target_is_refused_in_one_line_before_prefect_starts(scratch, monkeypatch, capsys):
    with pytest.raises(SystemExit) as e:
        _main(monkeypatch, "slwo", "b")
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: unknown stage 'slwo' (did you mean slow?); `dvc stage list` names them\n"


def test_an_mlflow_store_that_cannot_be_written_is_named_in_one_line(scratch, monkeypatch, capsys, tmp_path):
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"")
    store.chmod(0o444)
    immutable = subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode == 0  # root ignores 0444
    try:
        with pytest.raises(SystemExit) as e:
            _main(monkeypatch)
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(store)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: the MLflow store {store} (MLFLOW_TRACKING_URI) is not writable")


def test_a_second_pipeline_in_the_clone_is_refused_with_the_first_ones_pid(scratch, monkeypatch, capsys):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from orchestration.repro import clone_lock\n"
                               "with clone_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n"
                               "    time.sleep(60)\n", str(scratch)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(SystemExit) as e:
            _main(monkeypatch, "b")
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"another pipeline is running in this clone (pid {holder.pid})" in err


@pytest.mark.slow
def test_stages_are_task_runs_of_the_pipeline_run_with_their_logs_and_a_failure_names_its_cause(scratch,
                                                                                                prefect_api):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, LogFilter, LogFilterFlowRunId

    import orchestration.pipeline as pipeline_cli

    state = pipeline_cli.pipeline(targets=["c"], push=False, return_state=True)
    assert state.is_failed()
    assert "stage c failed: the stage broke on line 3" in state.message
    flow_run_id = state.state_details.flow_run_id
    from orchestration.prefect_api import flush_to_api

    flush_to_api()  # the logs Prefect still holds for the API
    with get_client(sync_client=True) as client:
        tasks = {t.name: t for t in client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [flow_run_id]}))}
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    assert {"a", "b", "c"} <= set(tasks)
    assert tasks["a"].state.is_completed() and tasks["c"].state.is_failed()
    by_task = {}
    for log in logs:
        by_task.setdefault(log.task_run_id, []).append(log.message)
    assert "made a" in by_task[tasks["a"].id] and "made b" in by_task[tasks["b"].id]
    assert any("the stage broke on line 3" in m for m in by_task[tasks["c"].id])


@pytest.mark.slow
def test_ctrl_c_stops_the_stage_and_exits_130_in_one_line(scratch, prefect_api):
    driver = ("import sys\nfrom pathlib import Path\nimport orchestration.pipeline as p\n"
              "p.PROJECT_ROOT = Path(sys.argv[1])\nsys.argv = ['orchestration.pipeline', '--no-push', 'slow']\n"
              "p.main()\n")
    proc = subprocess.Popen([sys.executable, "-c", driver, str(scratch)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for(scratch / "slow.pid", timeout_s=120)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert (scratch / "interrupted").read_text() == "yes"
    assert "Traceback" not in out, out
    assert out.rstrip().splitlines()[-1].startswith("interrupted: the running stage was stopped"), out
