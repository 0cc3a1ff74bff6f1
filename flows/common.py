"""What every stage flow does first: validate params.yaml (before any work) and read its matrix arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

from mwpgen.config import DATASETS, Params, ParamsError, load_params
from mwpgen.io import atomic_write_text, read_jsonl, write_json
from mwpgen.paths import FoldPaths

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA = PROJECT_ROOT / "data"


def stage_args(description: str, *, dataset: bool = False, fold: bool = False,
               models: tuple[str, ...] = (), variants: tuple[str, ...] = ()) -> argparse.Namespace:
    cli = argparse.ArgumentParser(description=description)
    cli.add_argument("--params", default="params.yaml", help="parameters file (validated before any work)")
    if models:
        cli.add_argument("--model", required=True, choices=models)
    if variants:
        cli.add_argument("--variant", required=True, choices=variants,
                         help="a Table 4 ablation variant (mwpgen/ours/ablation.py)")
    if dataset:
        cli.add_argument("--dataset", required=True, choices=DATASETS)
    if fold:
        cli.add_argument("--fold", required=True, type=int)
    return cli.parse_args()


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


def loss_curve_csv(losses: list[float]) -> str:
    """A `step,loss` training curve (plots/train, `dvc plots show`)."""
    return "\n".join(["step,loss"] + [f"{i},{loss:.6f}" for i, loss in enumerate(losses, start=1)]) + "\n"


def record_training(run, paths: FoldPaths, metrics: dict, curve_csv: str) -> None:
    """A training stage's outputs: its curve (plots/train) and metrics file (metrics/train), both logged to the
    MLflow run with the numeric metrics."""
    atomic_write_text(paths.train_curve, curve_csv)
    write_json(paths.train_metrics, metrics)
    run.metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
    run.artifact(paths.train_curve)
    run.artifact(paths.train_metrics)
