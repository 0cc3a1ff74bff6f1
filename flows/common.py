"""What every stage flow does first: validate params.yaml (before any work) and read its matrix arguments."""

from __future__ import annotations

import argparse
import atexit
import gc
import logging
import os
import sys
import traceback
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from mwpgen.config.files import ParamsError
from mwpgen.config.schema import DATASETS, Params, load_params
from mwpgen.io import atomic_write_text, read_jsonl, write_json
from mwpgen.paths import PROJECT_ROOT, FoldPaths
from tracking.provenance import machine
from tracking.runs import curve_rows, is_timing

DATA = PROJECT_ROOT / "data"
SHARED_API_FILE = PROJECT_ROOT / ".prefect" / "api-url"  # `python -m orchestration.prefect_api serve` writes it


def use_shared_prefect_api(file: Path = SHARED_API_FILE) -> None:
    """Without PREFECT_API_URL (a plain `dvc repro`), report to this clone's shared Prefect server when one answers,
    instead of starting a temporary server for this stage alone (some 7 s)."""
    if os.environ.get("PREFECT_API_URL") or not file.exists():
        return
    url = file.read_text().strip()
    try:
        urllib.request.urlopen(f"{url}/health", timeout=1).close()
    except (OSError, ValueError):
        return
    os.environ["PREFECT_API_URL"] = url
    if "prefect.context" in sys.modules:  # Prefect read its settings at import
        sys.modules["prefect.context"].refresh_global_settings_context()


def stage_args(description: str, *, dataset: bool = False, fold: bool = False,
               models: tuple[str, ...] = (), variants: tuple[str, ...] = (),
               methods: tuple[str, ...] = ()) -> argparse.Namespace:
    cli = argparse.ArgumentParser(description=description)
    cli.add_argument("--params", default="params.yaml", help="parameters file (validated before any work)")
    if models:
        cli.add_argument("--model", required=True, choices=models)
    if variants:
        cli.add_argument("--variant", required=True, choices=variants,
                         help="a Table 4 ablation variant (mwpgen/ours/ablation.py)")
    if methods:
        cli.add_argument(
            "--method", required=True, choices=methods, help="how ours is tuned on readings (mwpgen/tuning.py)"
        )
    if dataset:
        cli.add_argument("--dataset", required=True, choices=DATASETS)
    if fold:
        cli.add_argument("--fold", required=True, type=int)
    return cli.parse_args()


DEBUG_ENV = "MWPGEN_DEBUG"  # =1: full tracebacks (ours and Prefect's) instead of the one line that matters
_FAILURE: list[str] = []  # the failed stage's one line, repeated after Prefect's shutdown messages


@atexit.register  # registered at import, before Prefect starts its server: atexit runs it after that server stops
def _repeat_failure() -> None:
    if _FAILURE:
        print(_FAILURE[0], file=sys.stderr, flush=True)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if isinstance(e, (ValueError, OSError, RuntimeError)) else f"{type(e).__name__}: {text}"


class NoTraceback(logging.Filter):
    """Prefect logs a failed task or flow with its whole traceback; without MWPGEN_DEBUG the message is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


def run_stage(flow: Callable, *args, failed_metrics: Sequence[Path] = ()) -> None:
    """Run a stage flow as a command. On failure, one line names what went wrong
    (exit code 1), each of the stage's `failed_metrics` files is replaced by {"failed": that line} so no stale good
    result remains, and the traceback is shown only with MWPGEN_DEBUG=1."""
    debug = os.environ.get(DEBUG_ENV) == "1"
    use_shared_prefect_api()
    # The interpreter's exit ends in garbage collections that walk every object Prefect, MLflow and pydantic made
    # (0.7-1.1 s): frozen at exit, they are skipped. Exit handlers (Prefect's log and event drains, MLflow's) still
    # run and files still flush; only garbage in reference cycles is left to the OS.
    atexit.register(gc.freeze)
    if not debug:
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).addFilter(NoTraceback())
    try:
        flow(*args)
    except (Exception, SystemExit) as e:
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        message = str(e.code) if isinstance(e, SystemExit) else _one_line(e)
        message = message.removeprefix("error: ")
        for path in failed_metrics:
            write_json(path, {"failed": message})
        if debug:
            traceback.print_exc()
        _FAILURE.append(f"error: {message}" + ("" if debug else f"  (traceback: {DEBUG_ENV}=1)"))
        print(_FAILURE[0], file=sys.stderr, flush=True)
        sys.exit(1)
    sys.exit(0)


def params_or_exit(path: str) -> Params:
    try:
        return load_params(path)
    except ParamsError as e:
        raise SystemExit(f"error: {e}") from None


def fold_paths(model: str | None, dataset: str, fold: int) -> FoldPaths:
    return FoldPaths(PROJECT_ROOT, model, dataset, fold)


def fold_keywords(paths: FoldPaths, context: str, split: str) -> dict[str, list[str]]:
    """id -> the `context` keywords (noun / tfidf; the keywords stage) of one split of a fold."""
    return {r["id"]: r[context] for r in read_jsonl(paths.keywords) if r["split"] == split}


def write_metrics(path: Path, timing_file: Path, metrics: dict) -> dict:
    """Write a stage's metrics file without its timings, which go to `timing_file` (FoldPaths.train_timing,
    .scores_timing; a plain DVC out, so `dvc metrics show` stays narrow): its `timing` mapping (as the trainers give
    it), `timings_s`, and every top-level seconds or rate (`wall_s`, `phase1_step_s`, `tokens_per_s`;
    tracking.runs.is_timing). The timing file is written even empty: dvc.yaml declares it. Returns the timings."""
    def apart(k: str) -> bool:
        return k in ("timing", "timings_s") or is_timing(k)

    timing = {**(metrics.get("timing") or {}), **(metrics.get("timings_s") or {}),
              **{k: v for k, v in metrics.items() if apart(k) and k not in ("timing", "timings_s")}}
    write_json(path, {k: v for k, v in metrics.items() if not apart(k)})
    write_json(timing_file, {**timing, "machine": machine()})
    return timing


def read_metrics(path: Path, timing_file: Path) -> dict:
    """A metrics file with its timings merged back in, as the stage computed them (timings first: a metric wins)."""
    from mwpgen.io import read_json

    return {**(read_json(timing_file) if timing_file.exists() else {}), **read_json(path)}


def record_training(run, paths: FoldPaths, metrics: dict, curve_csv: str) -> None:
    """A training stage's outputs: its curve (plots/train) and metrics file (metrics/train, its timings apart in
    timing/), all logged to the MLflow run: the numeric metrics (timings as `time/…`) and the curve as step-indexed
    `train_loss` / `val_loss`, the same names for every trainer, so MLflow charts them across runs."""
    atomic_write_text(paths.train_curve, curve_csv)
    timing = write_metrics(paths.train_metrics, paths.train_timing, metrics)
    run.metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float)) and k not in timing})
    run.metrics({f"timing.{k}": v for k, v in timing.items() if isinstance(v, (int, float))})
    run.curve(curve_rows(curve_csv))
    run.artifact(paths.train_curve)
    run.artifact(paths.train_metrics)
