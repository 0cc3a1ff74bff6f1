"""What every stage flow does first: validate params.yaml (before any work) and read its matrix arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

from mwpgen.config import DATASETS, Params, ParamsError, load_params

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DATA = PROJECT_ROOT / "data"
GENERATORS = ("gpt", "gpt_pre")  # the paper's GPT (random init) and GPT-pre (pre-trained) baselines
SEQ2SEQ = ("seq2seq_rnn", "seq2seq_rnn_glove", "seq2seq_tf")  # the paper's seq2seq baselines, from scratch
OURS = "ours"  # the paper's method; its Table 4 variants are "ours-<variant>" (mwpgen/ours/ablation.py)
EVALUATOR = "mwp2eq"  # the independent parser that judges ACC-eq


def stage_args(description: str, *, dataset: bool = False, fold: bool = False,
               models: tuple[str, ...] = (), variants: tuple[str, ...] = ()) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", help="parameters file (validated before any work)")
    if models:
        parser.add_argument("--model", required=True, choices=models)
    if variants:
        parser.add_argument("--variant", choices=variants, help="a Table 4 ablation variant (mwpgen/ours/ablation.py)")
    if dataset:
        parser.add_argument("--dataset", required=True, choices=DATASETS)
    if fold:
        parser.add_argument("--fold", required=True, type=int)
    return parser.parse_args()


def params_or_exit(path: str) -> Params:
    try:
        return load_params(path)
    except ParamsError as e:
        raise SystemExit(f"error: {e}") from None


def all_models() -> tuple[str, ...]:
    """Every model a generate/evaluate stage accepts: baselines, ours and its ablation variants."""
    from mwpgen.ours.ablation import VARIANTS, model_name

    return (*GENERATORS, *SEQ2SEQ, OURS, *(model_name(v) for v in VARIANTS))


def fold_name(model: str | None, dataset: str, fold: int) -> str:
    """Relative path piece shared by every per-fold output: `<model>/<dataset>/fold<k>`."""
    return f"{model + '/' if model else ''}{dataset}/fold{fold}"


def fold_keywords(dataset: str, fold: int, context: str, split: str) -> dict[str, list[str]]:
    """id -> the `context` keywords (noun / tfidf; the keywords stage) of one split of a fold."""
    from mwpgen.io import read_jsonl

    rows = read_jsonl(DATA / "keywords" / f"{fold_name(None, dataset, fold)}.jsonl")
    return {r["id"]: r[context] for r in rows if r["split"] == split}


def loss_curve_csv(losses: list[float]) -> str:
    """A `step,loss` training curve (plots/train, `dvc plots show`)."""
    return "\n".join(["step,loss"] + [f"{i},{loss:.6f}" for i, loss in enumerate(losses, start=1)]) + "\n"


def record_training(run, name: str, metrics: dict, curve_csv: str) -> tuple[Path, Path]:
    """A training stage's outputs: plots/train/<name>.csv and metrics/train/<name>.json, both logged to the MLflow
    run with the numeric metrics. Returns (curve, metrics file)."""
    from mwpgen.io import atomic_write_text, write_json

    curve = PROJECT_ROOT / "plots" / "train" / f"{name}.csv"
    out = PROJECT_ROOT / "metrics" / "train" / f"{name}.json"
    atomic_write_text(curve, curve_csv)
    write_json(out, metrics)
    run.metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
    run.artifact(curve)
    run.artifact(out)
    return curve, out
