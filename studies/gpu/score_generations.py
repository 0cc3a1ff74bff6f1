"""Score a generations table made outside the pipeline (e.g. benchmarks/bench_ours_epoch.py on a GPU machine) exactly as
the `evaluate` stage scores the pipeline's own: BLEU-4 / METEOR / ROUGE-L against the real test problem, ACC-eq
by this fold's independent evaluator mwp2eq (models/evaluator/<dataset>/fold<k>, trained by the pipeline), % novel
against the whole training fold, ACC-eq on novel problems and Dist-3.

    python -m studies.gpu.score_generations studies/gpu/smollm2-135m/generations.csv --dataset arithmetic --fold 0

Writes scores.json beside the table and prints it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import TextScorer, score_generations
from mwpgen.io import read_generations
from mwpgen.lm.decoding import predict_equations
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table", type=Path, help="CSV with the columns of results/generations/*.csv")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--fold", type=int, required=True)
    ap.add_argument("--data", type=Path, default=Path("data"))
    ap.add_argument("--evaluator", type=Path, help="default: models/evaluator/<dataset>/fold<k>")
    args = ap.parse_args()

    rows = read_generations(args.table)
    evaluator = args.evaluator or Path("models") / "evaluator" / args.dataset / f"fold{args.fold}"
    if not (evaluator / "config.json").exists():
        raise SystemExit(f"error: no evaluator mwp2eq at {evaluator}; run `dvc repro train_evaluator` first")
    evaluator, tokenizer = load_model_and_tokenizer(str(evaluator), DEFAULT_MODEL_CACHE)
    generated = [r["generated"] for r in rows]
    parsed = predict_equations(evaluator.eval(), tokenizer, generated)
    training_texts = [r["text"] for r in load_fold(args.data, args.dataset, args.fold).train]
    with TextScorer() as scorer:
        scores, _ = score_generations(rows, parsed, training_texts, scorer)
    scores.pop("timings_s")
    result = {"table": str(args.table), "dataset": args.dataset, "fold": args.fold, "n": len(rows), **scores}
    (args.table.parent / "scores.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
