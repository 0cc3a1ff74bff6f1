"""One Prefect API per run (orchestration/prefect_api.py): reused when PREFECT_API_URL names one, else started on a
free loopback port and stopped at the end -- after a failure, a Ctrl-C or a SIGTERM too; the stages a pipeline
runs report to it and start no temporary server of their own."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from orchestration.prefect_api import API_ENV, PrefectServerError, free_port, is_serving, point_prefect_at, shared_api
from tests.helpers.scratch_project import MIRROR, ROOT, copy_project, run_in, scratch_env

TEMPORARY_SERVER = "Starting temporary server"  # what Prefect logs when a process starts its own


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One PREFECT_HOME for the servers these tests start one after the other: its database is created (the
    migrations, most of a first start) once."""
    return tmp_path_factory.mktemp("prefect-home")


def test_an_api_already_named_is_reused_and_left_running(prefect_api, monkeypatch):
    monkeypatch.setenv(API_ENV, prefect_api)
    with shared_api() as url:
        assert url == prefect_api and os.environ[API_ENV] == prefect_api
    assert is_serving(prefect_api) and os.environ[API_ENV] == prefect_api


def test_an_api_named_but_not_answering_is_refused(monkeypatch):
    monkeypatch.setenv(API_ENV, f"http://127.0.0.1:{free_port()}/api")
    with pytest.raises(PrefectServerError, match="does not answer"):
        with shared_api():
            pass


def test_a_server_is_started_named_and_stopped_even_after_a_failure(home, monkeypatch):
    previous = os.environ.get(API_ENV)
    monkeypatch.delenv(API_ENV, raising=False)
    from prefect.settings import get_current_settings

    try:
        with pytest.raises(ValueError, match="a stage failed"):
            with shared_api(home, ui=False) as url:
                assert url.startswith("http://127.0.0.1:") and is_serving(url)
                assert os.environ[API_ENV] == url and get_current_settings().api.url == url  # this process too
                raise ValueError("a stage failed")
        assert not is_serving(url) and API_ENV not in os.environ and get_current_settings().api.url is None
    finally:  # this process's Prefect settings back on the session's server (monkeypatch restores only os.environ)
        point_prefect_at(previous)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_stops_its_server(home, sig):
    # SIGINT back to Python's KeyboardInterrupt: a process started by one that ignores it (as code earlier in the
    # suite leaves pytest) inherits SIG_IGN, and the signal would never arrive.
    code = ("import signal, sys, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "from orchestration.prefect_api import shared_api\n"
            "with shared_api(sys.argv[1], ui=False) as url:\n    print(url, flush=True)\n    time.sleep(300)\n")
    env = {k: v for k, v in os.environ.items() if k != API_ENV}
    proc = subprocess.Popen([sys.executable, "-c", code, str(home)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    assert is_serving(url), proc.stderr.read() if proc.poll() is not None else url
    proc.send_signal(sig)
    proc.wait(timeout=120)  # the bound: flush_to_api's 2 x 10 s, the server's 30 s of graceful stop, then a kill
    deadline = time.time() + 10
    while is_serving(url) and time.time() < deadline:
        time.sleep(0.2)
    assert not is_serving(url)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.skipif(not (MIRROR / "arithmetic").exists(), reason=f"no data mirror at {MIRROR}")
def test_the_pipeline_starts_one_server_and_its_stages_use_it(tmp_path, home):
    """`python -m orchestration.pipeline` without PREFECT_API_URL: one server of its own, which the pipeline flow and
    the stage flows report to (no process starts a temporary server), stopped when the command ends. With
    --no-commit (a first look) DVC records the outputs in dvc.lock but copies none into its cache."""
    copy_project(tmp_path)
    if (home / "prefect.db").exists():  # a database the tests above created: no migrations to wait for (~7 s)
        (tmp_path / ".prefect").mkdir()
        shutil.copy(home / "prefect.db", tmp_path / ".prefect" / "prefect.db")
        db = sqlite3.connect(tmp_path / ".prefect" / "prefect.db")
        db.execute("delete from flow_run")
        db.commit()
        db.close()
    env = scratch_env(tmp_path)
    env.pop(API_ENV, None)
    proc = run_in(tmp_path, env, [sys.executable, "-m", "orchestration.pipeline", "download", "--no-commit"])
    out = proc.stdout + proc.stderr
    assert "Running stage 'download'" in out
    assert TEMPORARY_SERVER not in out, out[-3000:]
    url = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("Prefect API for every stage"))
    assert url.startswith("http://127.0.0.1:") and not is_serving(url)  # stopped at the end
    db = sqlite3.connect(tmp_path / ".prefect" / "prefect.db")  # the server's database (PREFECT_HOME)
    runs = db.execute("select flow.name, flow_run.state_type from flow_run join flow on flow.id = flow_run.flow_id"
                      ).fetchall()
    assert sorted(runs) == [("download", "COMPLETED"), ("pipeline", "COMPLETED")]
    assert "data/raw" in (tmp_path / "dvc.lock").read_text()
    cached = [p for p in (tmp_path / ".dvc" / "cache").rglob("*") if p.is_file()]
    assert not cached, cached


def test_a_stage_of_plain_dvc_repro_uses_the_clones_shared_server_when_it_answers(prefect_api, monkeypatch,
                                                                                   tmp_path):
    """flows.common.use_shared_prefect_api: the URL `python -m orchestration.prefect_api serve` wrote, if it answers;
    else nothing changes (the stage starts its temporary server as before); PREFECT_API_URL set wins."""
    from flows.common import use_shared_prefect_api

    file = tmp_path / "api-url"
    monkeypatch.delenv(API_ENV, raising=False)
    use_shared_prefect_api(file)  # no file
    assert API_ENV not in os.environ
    file.write_text(f"http://127.0.0.1:{free_port()}/api\n")  # a server that is gone
    use_shared_prefect_api(file)
    assert API_ENV not in os.environ
    file.write_text(prefect_api + "\n")
    try:
        use_shared_prefect_api(file)
        assert os.environ[API_ENV] == prefect_api
    finally:
        point_prefect_at(prefect_api)  # the session's server, as before
    monkeypatch.setenv(API_ENV, "http://elsewhere/api")
    use_shared_prefect_api(file)
    assert os.environ[API_ENV] == "http://elsewhere/api"


@pytest.mark.slow
def test_serve_names_its_server_in_the_file_while_it_runs(home, tmp_path):
    file = tmp_path / "api-url"
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.pop(API_ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "orchestration.prefect_api", "serve", "--file", str(file)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout.readline().startswith("Prefect API for this clone: http://127.0.0.1:")
        url = file.read_text().strip()
        assert is_serving(url)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert not file.exists() and not is_serving(url)
