"""Train the consistency classifier of mwpgen/judge/rule.py on a fold's training problems: its real (problem, equation)
pairs as "yes", a hard negative made from each as "no" (a fresh one per epoch), starting from the fold's evaluator.

    bash scripts/run.sh python -m studies.judge_choice.train_judge_classifier \\
        --evaluator models/evaluator/arithmetic/fold0 \\
        --out models/judge_classifier/arithmetic/fold0

Only training-fold problems are read (not its validation slice, where the judge's development labels come from, nor
the test fold); the settings are train.evaluator's (params.yaml), its epochs capped by --epochs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mwpgen.config.schema import load_params
from mwpgen.data.folds import load_fold
from mwpgen.lm.loading import load_trained
from mwpgen.lm.training import train_causal_lm
from studies.judge_choice.candidates import consistency_examples

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--evaluator", type=Path, required=True, help="the fold's evaluator: the starting weights")
    cli.add_argument("--out", type=Path, required=True)
    cli.add_argument("--data", type=Path, default=ROOT / "data", help="holds processed/ and splits/")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--epochs", type=int, default=1)
    args = cli.parse_args()
    params = load_params(ROOT / "params.yaml")
    exp, cfg = params.experiment, params.train.evaluator
    fold = load_fold(args.data, args.dataset, args.fold, 0, 0, exp.seed, validation_size=exp.validation_size)
    model, tokenizer = load_trained(args.evaluator, "cpu")
    result = train_causal_lm(model, tokenizer, consistency_examples(fold.train, exp.seed), epochs=args.epochs,
                             batch_size=cfg.batch_size, lr=cfg.lr, max_length=256, seed=exp.seed,
                             mixed_precision=params.train.mixed_precision, checkpoint_dir=args.out,
                             log_every=params.train.log_every, max_steps=0, grad_accum=1, eval_every=0, patience=0,
                             save_every=cfg.save_every, resume_dir=args.out.with_name(args.out.name + "-state"))
    summary = {k: result[k] for k in ("steps", "tokens", "precision")} | {"wall_time_s": result["timing"]["wall_s"],
        "n_train_problems": len(fold.train), "examples_per_epoch": 2 * len(fold.train), "epochs": args.epochs}
    (args.out / "training.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
