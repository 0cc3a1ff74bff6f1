"""Screenshot the MLflow UI's `mwpgen` experiment in headless Chromium, against a scratch tracking store.

    bash scripts/run.sh python scripts/screenshot_mlflow_ui.py      # -> docs/mlflow_ui/{experiment,plain_link}.png

It makes a scratch sqlite store in a temporary folder with runs of the `mwpgen` experiment, created by
tracking/runs.py as the stages create them (two pipeline runs, `pipeline · smoke · all` and `pipeline · default ·
all`, each with `<model> · arithmetic` -> `<model> · arithmetic · fold 0` children holding metrics), starts
`mlflow server` on a free loopback port and, each in a fresh Chromium profile (as a first visit), saves two pictures:
  experiment.png   tracking.runs.ui_url: what scripts/mlflow_ui.sh prints, the experiment's runs table;
  plain_link.png   #/experiments/<id>, the experiment's plain link, which MLflow 3.17.2 opens on the side its
                   sidebar switch is on (GenAI by default: the Overview of traces), whatever the experiment's tags.
Needs Debian's `chromium` (`apt-get install chromium`); not part of the test suite. Nothing leaves the machine: the
server listens on 127.0.0.1 and Chromium's background networking is off.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = {  # model -> (BLEU-4, ACC-eq) of the committed default run (README "Results"), to have something to compare
    "gpt_pre": (0.199, 0.326),
    "ours": (0.169, 0.295),
    "seq2seq-tf": (0.05, 0.1),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_store(home: Path) -> str:
    """A scratch store with the mwpgen experiment and two pipeline runs; returns the experiment id."""
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlflow.db'}"
    sys.path.insert(0, str(ROOT))
    from tracking.provenance import PROFILE_TAG
    from tracking.runs import PARENT_ENV, client, experiment_id, fold_run, stage_run

    for profile, scale, wall in (("smoke", 0.2, 621.0), ("default", 1.0, 7491.0)):
        with stage_run("pipeline", tags={"dvc.targets": "all", PROFILE_TAG: profile}) as pipeline:
            pipeline.params({"profile": profile, "experiment": {"datasets": ["arithmetic"], "folds": [0]}})
            os.environ[PARENT_ENV] = pipeline.run_id
            for model, (bleu, acc) in RUNS.items():
                with fold_run(model, "arithmetic", 0, "evaluate") as run:
                    run.params({"model": model, "dataset": "arithmetic", "fold": 0})
                    run.metrics({"bleu4": bleu * scale, "acc_eq_equivalent": acc * scale, "n_test": 298})
            pipeline.metrics({"wall_s": wall})
        os.environ.pop(PARENT_ENV)
    return experiment_id(client())


def wait_until_serving(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"mlflow server exited with {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"mlflow server did not answer {url} within {timeout_s:.0f} s")


def screenshot(url: str, out: Path, budget_ms: int, chromium: str, size: str) -> None:
    profile = tempfile.mkdtemp(prefix="mwpgen-chromium-")
    try:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", f"--window-size={size}", f"--virtual-time-budget={budget_ms}",
               f"--screenshot={out}", url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "mlflow_ui")
    cli.add_argument("--budget-ms", type=int, default=20000, help="Chromium's virtual time budget for the page's JS")
    cli.add_argument("--size", default="1600,1000")
    cli.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = cli.parse_args()
    if not shutil.which(args.chromium):
        raise SystemExit("no chromium: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="mwpgen-mlflow-ui-") as tmp:
        home = Path(tmp)
        exp = make_store(home)
        from tracking.runs import ui_url

        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
             "--default-artifact-root", (home / "mlartifacts").as_uri(), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_serving(base + "/", server, 180)
            args.out_dir.mkdir(parents=True, exist_ok=True)
            for name, url in (("experiment.png", ui_url(base)), ("plain_link.png", f"{base}/#/experiments/{exp}")):
                out = (args.out_dir / name).resolve()
                screenshot(url, out, args.budget_ms, args.chromium, args.size)
                print(f"{url} -> {out}")
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
