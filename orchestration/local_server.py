"""A server process on loopback, as the Prefect API, `mlflow server` and `mlflow models serve` are run here: a free
port, waiting until it answers, and stopping it with its children (each is started in a session of its own:
`start_new_session=True`, so that its process group is its own)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


class ServerNotServing(RuntimeError):
    pass


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str, timeout_s: float = 2.0) -> bool:
    """Whether `url` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def wait_until_serving(url: str, server: subprocess.Popen, timeout_s: float, *, log: Path | None = None,
                       what: str = "the server") -> float:
    """Poll `url` until it answers 200; the seconds that took. Raises ServerNotServing, with the end of the server's
    `log` where there is one, if the server exits first or `timeout_s` passes."""
    start = time.monotonic()
    while not answers(url):
        if server.poll() is not None or time.monotonic() - start > timeout_s:
            why = f"exited with {server.returncode}" if server.poll() is not None else f"not up after {timeout_s:.0f} s"
            tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
            raise ServerNotServing(f"{what} ({url}) {why}" + (f"; the end of {log}:\n{tail}" if tail else ""))
        time.sleep(0.2)
    return time.monotonic() - start


def stop_group(server: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM to the server's process group (a server started with `start_new_session=True` and its workers), then
    SIGKILL if it has not ended after `timeout_s`."""
    try:
        os.killpg(server.pid, signal.SIGTERM)  # also when the leader has ended: its workers may not have
    except ProcessLookupError:
        return
    try:
        server.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=timeout_s)
