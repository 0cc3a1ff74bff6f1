"""`mwpgen generate` in parts (arguments and main; requests; output and resume; model and judge resolution), each
small and of one job; MLflow reached through tracking/model_store.py, in process and only for an MLflow --model;
the served model's registered name defined once."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mwpgen.generate import cli, model_resolution
from orchestration.code_deps import closure
from tests.helpers.tiny_bundle import make_tiny_bundle

ROOT = Path(__file__).resolve().parents[2]
CLI_PARTS = ("cli.py", "cli_errors.py", "cli_requests.py", "model_resolution.py", "output_checks.py",
             "output_file.py", "output_format.py", "output_lock.py", "served_name.py", "stop_signals.py")


def _one_line(code: int, err: str, expected: str, exit_code: int = 2) -> None:
    assert code == exit_code and err.count("\n") == 1 and err.startswith("mwpgen: error: "), (code, err)
    assert expected in err and "Traceback" not in err, err


def test_every_part_of_the_command_line_is_small():
    sizes = {name: len((ROOT / "mwpgen" / "generate" / name).read_text(encoding="utf-8").splitlines())
             for name in CLI_PARTS}
    assert all(n <= 260 for n in sizes.values()), sizes


def test_the_served_models_name_is_spelled_once_in_the_code():
    """Not a second literal beside the constant: code that logs, registers or fetches the model reads the one."""
    found = []
    for folder in ("mwpgen", "tracking"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and n.value == "mwpgen-ours"]
    assert found == ["mwpgen/generate/served_name.py:5"], found


def test_the_served_model_does_not_depend_on_the_command_line():
    """tracking/pyfunc_model.py (stage register) takes the name from served_name.py, not from cli.py: an edit to the
    command line does not make the register stage stale."""
    runs = {str(p) for p in closure(ROOT, "tracking.pyfunc_model")}
    assert "mwpgen/generate/served_name.py" in runs
    assert not {"mwpgen/generate/cli.py", "mwpgen/generate/model_resolution.py"} & runs


def test_a_bundle_folder_never_loads_mlflow(tmp_path):
    bundle = make_tiny_bundle(tmp_path / "ours")
    code = ("import sys; from mwpgen.generate import cli; "
            f"code = cli.main(['generate', '--model', {str(bundle)!r}, '--equation', 'x = 12 - 5', '--context', "
            "'apples', '--max-new-tokens', '4']); "
            "sys.exit(code or (3 if 'mlflow' in sys.modules else 0))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A scratch sqlite MLflow store holding one run with a model folder logged as mwpgen-ours."""
    from tracking.runs import client, experiment_id

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model = tmp_path / "logged"
    model.mkdir()
    (model / "MLmodel").write_text("flavors: {}\n", encoding="utf-8")
    c = client()
    run = c.create_run(experiment_id(c))
    c.log_artifacts(run.info.run_id, str(model), artifact_path="mwpgen-ours")
    return run.info.run_id


def test_an_mlflow_model_is_fetched_in_process_through_tracking(store, monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise AssertionError("fetched through a subprocess")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    for spec in (store, f"runs:/{store}/mwpgen-ours"):
        folder = model_resolution.resolve_model(spec)
        assert (folder / "MLmodel").read_text(encoding="utf-8") == "flavors: {}\n"


def test_a_missing_mlflow_model_is_one_line_naming_it(store, capsys):
    code = cli.main(["generate", "--model", f"runs:/{store}/elsewhere", "--equation", "x = 12 - 5", "--context",
                     "apples"])
    _one_line(code, capsys.readouterr().err, f"--model runs:/{store}/elsewhere: could not fetch runs:/{store}/"
              "elsewhere from MLflow at sqlite:///")


def test_an_unreachable_tracking_server_is_named_at_once(capsys, monkeypatch):
    """MLflow's client retries a refused connection for about four minutes (issue S2 item 3): said at once."""
    with socket.socket() as s:  # a port nothing listens on: bound, never listening, so a connect is refused
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        code = cli.main(["generate", "--model", "models:/mwpgen-ours@arithmetic-fold0", "--equation", "x = 12 - 5",
                         "--context", "apples"])
    _one_line(code, capsys.readouterr().err, f"cannot reach the MLflow tracking server at {url} (Connection refused)")


def test_a_tracking_server_answering_errors_is_retried_twice_not_for_minutes(capsys, monkeypatch):
    """MLflow retries a 5xx seven times with doubling waits (about four minutes); a fetch for a waiting person
    retries twice (the user's MLFLOW_HTTP_REQUEST_MAX_RETRIES would win)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Unavailable(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
        code = cli.main(["generate", "--model", "models:/mwpgen-ours/1", "--equation", "x = 12 - 5", "--context",
                         "apples"])
    finally:
        server.shutdown()
        server.server_close()
    _one_line(code, capsys.readouterr().err, "--model models:/mwpgen-ours/1: could not fetch models:/mwpgen-ours/1")
    assert len(seen) == 3, seen  # the first try and two retries
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # put back as it was
