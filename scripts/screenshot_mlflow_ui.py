"""Screenshot the MLflow UI's `mwpgen` experiment of a real tracking store in headless Chromium.

    bash scripts/run.sh python scripts/screenshot_mlflow_ui.py               # this clone's mlflow.db
    bash scripts/run.sh python scripts/screenshot_mlflow_ui.py --store path/to/mlflow.db --pipeline <run id>

It copies the store (sqlite) into a temporary folder, so the clone's own is never touched, serves the copy with
`mlflow server` on a free loopback port and, each in a fresh Chromium profile (as a first visit), saves into
docs/mlflow_ui/:
  runs_table.png    what scripts/mlflow_ui.sh prints (tracking.runs.ui_url): the experiment's runs table;
  compare.png       MLflow's Compare of two fold runs of the pipeline run (default GPT-pre and ours): their names
                    say model, dataset and fold, and the metrics they share line up;
  val_loss.png      the metric page charting `val_loss` by step for every fold run of the pipeline run that has it;
  folds.png         (only where the store holds several folds of the model, e.g. one pipeline run per fold of the
                    folds profile) the runs table searched for that model's fold runs on the dataset, side by side.
The pipeline run is the newest top-level run named `pipeline · …` that finished, unless `--pipeline` names one.
Needs Debian's `chromium` (`apt-get install chromium`); not part of the test suite. Nothing leaves the machine: the
server listens on 127.0.0.1 and Chromium's background networking is off.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from orchestration.local_server import ServerNotServing, free_port, stop_group, wait_until_serving  # noqa: E402


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


def pipeline_run(c, exp: str, run_id: str | None):
    """The pipeline run to show: `run_id`, else the newest finished top-level `pipeline · …` run."""
    if run_id:
        return c.get_run(run_id)
    for run in c.search_runs([exp], "attributes.status = 'FINISHED'", order_by=["attributes.start_time DESC"],
                             max_results=200):
        if "mlflow.parentRunId" not in run.data.tags and run.info.run_name.startswith("pipeline · "):
            return run
    raise SystemExit("no finished `pipeline · …` run in this store: run the pipeline first (or name one: --pipeline)")


def fold_runs(c, exp: str, pipeline_id: str) -> list:
    """The fold runs (`model · dataset · fold k`) under the pipeline run's `model · dataset` runs."""
    groups = c.search_runs([exp], f"tags.mlflow.parentRunId = '{pipeline_id}'", max_results=500)
    runs = []
    for group in groups:
        runs += c.search_runs([exp], f"tags.mlflow.parentRunId = '{group.info.run_id}'", max_results=500)
    return [r for r in runs if "mwpgen.fold" in r.data.tags]


def pick(runs: list, model: str, dataset: str, fold: str):
    for r in runs:
        tags = r.data.tags
        if (tags.get("mwpgen.model"), tags.get("mwpgen.dataset"), tags.get("mwpgen.fold")) == (model, dataset, fold):
            return r
    raise SystemExit(f"no fold run of {model} on {dataset} fold {fold} under the pipeline run")


def q(obj) -> str:
    return urllib.parse.quote(json.dumps(obj, separators=(",", ":")))


def main() -> None:
    from tracking.runs import tracking_uri

    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--store", type=Path, help="the sqlite store (default: this clone's, tracking.runs)")
    cli.add_argument("--pipeline", help="the pipeline run's id (default: the newest finished one)")
    cli.add_argument("--compare", nargs=2, default=["gpt_pre", "ours"], metavar="MODEL")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", default="0")
    cli.add_argument("--folds-model", default="ours", help="the model whose fold runs folds.png shows side by side")
    cli.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "mlflow_ui")
    cli.add_argument("--budget-ms", type=int, default=25000, help="Chromium's virtual time budget for the page's JS")
    cli.add_argument("--size", default="1600,1000")
    cli.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = cli.parse_args()
    if not shutil.which(args.chromium):
        raise SystemExit("no chromium: apt-get install -y chromium")
    store = args.store or Path(tracking_uri().removeprefix("sqlite:///"))
    if not store.is_file():
        raise SystemExit(f"{store}: no such sqlite store")
    with tempfile.TemporaryDirectory(prefix="mwpgen-mlflow-ui-") as tmp:
        home = Path(tmp)
        shutil.copy2(store, home / "mlflow.db")
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlflow.db'}"
        from tracking.runs import EXPERIMENT, client, ui_url

        c = client()
        exp = c.get_experiment_by_name(EXPERIMENT).experiment_id
        pipeline = pipeline_run(c, exp, args.pipeline)
        runs = fold_runs(c, exp, pipeline.info.run_id)
        compared = [pick(runs, m, args.dataset, args.fold).info.run_id for m in args.compare]
        curves = [r.info.run_id for r in runs if "val_loss" in r.data.metrics]
        print(f"pipeline run {pipeline.info.run_name} ({pipeline.info.run_id}): {len(runs)} fold runs, "
              f"{len(curves)} with val_loss")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}",
             "--default-artifact-root", (home / "mlartifacts").as_uri(), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            pages = {
                "runs_table.png": ui_url(base, c),
                "compare.png": f"{base}/#/compare-runs?runs={q(compared)}&experiments={q([exp])}",
                "val_loss.png": (f"{base}/#/metric/val_loss?runs={q(curves)}&metric={q('val_loss')}"
                                 f"&experiments={q([exp])}&plot_metric_keys={q(['val_loss'])}&x_axis=step"),
            }
            # the folds profile runs a pipeline per fold: the model's fold runs are searched across the experiment
            search = (f"tags.`mwpgen.model` = '{args.folds_model}' and tags.`mwpgen.dataset` = '{args.dataset}' "
                      "and tags.`mwpgen.fold` != ''")
            folds = {r.data.tags["mwpgen.fold"] for r in c.search_runs([exp], search, max_results=500)}
            if len(folds) > 1:
                pages["folds.png"] = f"{ui_url(base, c)}&searchFilter={urllib.parse.quote(search)}"
            print(f"{args.folds_model} on {args.dataset}: fold runs of folds {sorted(folds)}")
            try:
                wait_until_serving(base + "/", server, 180, what="mlflow server")
            except ServerNotServing as e:
                raise SystemExit(str(e)) from None
            args.out_dir.mkdir(parents=True, exist_ok=True)
            for name, url in pages.items():
                out = (args.out_dir / name).resolve()
                # Compare lists the runs' metrics below its charts: a page tall enough to show them
                size = args.size if name != "compare.png" else args.size.split(",")[0] + ",2600"
                screenshot(url, out, args.budget_ms, args.chromium, size)
                print(f"{url} -> {out}")
        finally:
            stop_group(server)


if __name__ == "__main__":
    main()
