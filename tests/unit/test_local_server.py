"""orchestration/local_server.py: waiting for a loopback server and stopping it with its children."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from orchestration.local_server import ServerNotServing, answers, free_port, stop_group, wait_until_serving


def test_a_server_that_exits_is_named_with_the_end_of_its_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("line one\nbind: address already in use\n")
    server = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    server.wait()
    with pytest.raises(ServerNotServing, match=r"(?s)mlflow server \(http://127.0.0.1:\d+/\) exited with 3; the end of "
                       r".*server.log:\n.*address already in use"):
        wait_until_serving(f"http://127.0.0.1:{free_port()}/", server, 30, log=log, what="mlflow server")


def test_a_server_that_never_answers_times_out(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        with pytest.raises(ServerNotServing, match="not up after 1 s"):
            wait_until_serving(f"http://127.0.0.1:{free_port()}/", server, 1)
    finally:
        stop_group(server, timeout_s=5)
    assert server.returncode is not None


def test_waits_for_an_answer_and_stop_group_ends_the_children(tmp_path):
    port = free_port()
    child_pid = tmp_path / "child.pid"
    # a leader that starts an HTTP server as its child, as `mlflow models serve` starts uvicorn
    leader = ("import subprocess, sys, time; "
              f"c = subprocess.Popen([sys.executable, '-m', 'http.server', '{port}', '--bind', '127.0.0.1'], "
              f"cwd={str(tmp_path)!r}); open({str(child_pid)!r}, 'w').write(str(c.pid)); c.wait()")
    server = subprocess.Popen([sys.executable, "-c", leader], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/", server, 60) >= 0
    finally:
        stop_group(server, timeout_s=10)
    deadline = time.monotonic() + 10
    while answers(f"http://127.0.0.1:{port}/", 1) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not answers(f"http://127.0.0.1:{port}/", 1)
