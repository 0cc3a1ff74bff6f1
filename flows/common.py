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
from pathlib import Path
from typing import Callable, Sequence

from mwpgen.config.files import ParamsError
from mwpgen.config.schema import DATASETS, Params, load_params
from mwpgen.io import atomic_write_text, read_jsonl, write_json
from mwpgen.paths import PROJECT_ROOT, FoldPaths

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
        cli.add_argument("--method", required=True, choices=methods, help="how ours is tuned on readings (mwpgen/tuning.py)")
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


def loss_curve_csv(losses: list[float], val: list[dict] | None = None) -> str:
    """A `step,loss` training curve (plots/train, `dvc plots show`); with `val` (records {step, val_loss}) a
    `step,loss,val_loss` one, val_loss empty where it was not measured (and loss empty at step 0, before training)."""
    if val is None:
        return "\n".join(["step,loss"] + [f"{i},{loss:.6f}" for i, loss in enumerate(losses, start=1)]) + "\n"
    val_at = {r["step"]: r["val_loss"] for r in val}
    steps = sorted(set(range(1, len(losses) + 1)) | set(val_at))
    cell = lambda x: "" if x is None else f"{x:.6f}"
    return "\n".join(["step,loss,val_loss"] + [f"{s},{cell(losses[s - 1] if 1 <= s <= len(losses) else None)},"
                                               f"{cell(val_at.get(s))}" for s in steps]) + "\n"


def record_training(run, paths: FoldPaths, metrics: dict, curve_csv: str) -> None:
    """A training stage's outputs: its curve (plots/train) and metrics file (metrics/train), both logged to the
    MLflow run with the numeric metrics."""
    atomic_write_text(paths.train_curve, curve_csv)
    write_json(paths.train_metrics, metrics)
    run.metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
    run.artifact(paths.train_curve)
    run.artifact(paths.train_metrics)
