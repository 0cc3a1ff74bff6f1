"""Shared helpers for the integration tests: a scratch copy of the project with its own stores."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Two pytest workers on two cores, each with torch's two OpenMP threads: waiting threads sleep instead of spinning on
# the core another process needs (libgomp's default spins). The suite from a fresh clone, one pair on this 2-core Intel
# Xeon: 587.7 s against 645.6 s (benchmarks/bench_omp_wait.py: the mechanism). Set before anything imports torch; the
# stage processes the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from orchestration.prefect_api import pointed_server


@contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """A Prefect server on a free loopback port (orchestration.prefect_api, as a pipeline run starts it), named by
    PREFECT_API_URL in os.environ (scratch_env passes it to every stage process) and in this process's Prefect
    settings (a flow a test runs here reports to it rather than to a temporary server of its own) while it runs."""
    with pointed_server(home, ui=False) as url:
        yield url


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory) -> Iterator[str]:
    """One Prefect server for every stage process of the session (each would otherwise start and stop an
    ephemeral one, several seconds each). Loopback only; stopped at the end of the session."""
    with prefect_server(tmp_path_factory.mktemp("prefect-home")) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def no_temporary_prefect_server_at_exit():
    """A flow run in this process without an API starts Prefect's temporary server, which Prefect stops at
    interpreter exit and says so through its log handler -- whose stream pytest has closed by then: a
    `--- Logging error --- ... I/O operation on closed file` traceback after a green run. Tests run their flows
    against `prefect_api`; should one not, its server is stopped here, at the end of the session, while pytest
    still captures what it logs."""
    yield
    server_module = sys.modules.get("prefect.server.api.server")
    for server in list(getattr(getattr(server_module, "SubprocessASGIServer", None), "_instances", {}).values()):
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """Unit tests use tiny tensors: handing them to a second thread costs more than it saves (10x slower steps
    on a busy 2-core machine). Subprocesses (the DVC end-to-end tests) keep torch's default."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
