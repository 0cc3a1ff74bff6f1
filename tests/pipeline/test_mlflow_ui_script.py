"""scripts/mlflow_ui.sh prints its link only once the server answers: a server that cannot start prints none."""

from __future__ import annotations

import socket
import subprocess

from mwpgen.paths import PROJECT_ROOT


def test_no_link_when_the_server_never_answers(tmp_path):
    with socket.socket() as taken:  # the port is held, so the UI's server cannot bind it and stops
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        done = subprocess.run(["bash", "scripts/mlflow_ui.sh", str(port)], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=300,
                              env={"PATH": "/usr/bin:/bin", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'm.db'}"})
    assert done.returncode != 0
    assert "the link follows when it answers" in done.stdout and "mwpgen runs:" not in done.stdout
