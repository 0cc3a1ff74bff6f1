"""Issue 23's judge candidates "an mwp2eq trained on more parse data" and "agreement of independently trained
parsers", trained where a GPU is lent: a second parser (mwp2eq, from the pre-trained LM, the evaluator's settings)
fine-tuned on the MAWPS and translated Math23K training folds of fold k, with every problem whose normalised text is
an Arithmetic problem's removed (MAWPS holds Roy & Roth's problems, so Arithmetic's test problems would leak in).
Then the judge's features (mwpgen.judge.features: beam parses, margin, greedy verdict) of every blind-labelled problem
(data/labels/judge/problems.csv: uid, equation, problem; no label travels) under it, and its parse accuracy on the
real Arithmetic fold-k validation and test problems (measured, never used to choose).

    # on the GPU machine (mwpgen only, no Prefect, MLflow, DVC):
    python -m studies.judge_choice.gpu_second_parser --out $OUT
    bash scripts/run.sh python -m studies.judge_choice.compare_judges models/evaluator/arithmetic/fold0 \
        --second-parser studies/judge_choice/second_parser/features.jsonl    # here: the candidates, side by side

summary.json (data sizes, steps, time, parse accuracies) is rewritten after each part, so a run cut short still
says what it finished.
"""

from __future__ import annotations

import argparse
import csv
import platform
import time
from pathlib import Path

from mwpgen.config.schema import load_params
from mwpgen.data.folds import load_fold
from mwpgen.data.splits import normalise_text
from mwpgen.evaluation.metrics import acc_eq
from mwpgen.io import read_jsonl, write_json, write_jsonl

SOURCES = ("mawps", "math23k")


def parse_data(data: Path, fold: int, seed: int, validation_size: int) -> tuple[list[dict], list[dict], dict]:
    """(train, validation, sizes): the sources' fold-k training parts, none whose text is an Arithmetic problem's."""
    arithmetic = {normalise_text(r["text"]) for r in read_jsonl(data / "processed" / "arithmetic.jsonl")}
    train, validation, sizes = [], [], {}
    for source in SOURCES:
        part = load_fold(data, source, fold, seed=seed, validation_size=validation_size)
        kept = [r for r in part.train if normalise_text(r["text"]) not in arithmetic]
        kept_val = [r for r in part.validation if normalise_text(r["text"]) not in arithmetic]
        sizes[source] = {"train": len(part.train), "train_kept": len(kept), "validation_kept": len(kept_val)}
        train += kept
        validation += kept_val
    return train, validation, sizes


def main() -> None:
    import torch

    from mwpgen.device import resolve_device
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained
    from mwpgen.lm.prompts import mwp2eq_examples
    from mwpgen.lm.training import train_causal_lm
    from studies.judge_choice import candidates as judge

    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--out", type=Path, required=True)
    cli.add_argument("--params", type=Path, default=Path("params.yaml"))
    cli.add_argument("--data", type=Path, default=Path("data"))
    cli.add_argument("--labels", type=Path, default=Path("data/labels/judge/problems.csv"))
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument(
        "--batch-size", type=int, default=32, help="a GPU takes 4x the evaluator's 8 at about its step time"
    )
    cli.add_argument("--max-steps", type=int, default=450, help="optimizer steps (0: one epoch)")
    cli.add_argument("--models", type=Path, default=Path("/tmp/mwpgen-second-parser"))
    args = cli.parse_args()
    params = load_params(args.params)
    cfg, exp = params.train.evaluator, params.experiment
    device = resolve_device(params.train.device)
    args.out.mkdir(parents=True, exist_ok=True)
    train, validation, sizes = parse_data(args.data, args.fold, exp.seed, exp.validation_size)
    summary = {"device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
               "torch": torch.__version__, "fold": args.fold, "sources": sizes, "batch_size": args.batch_size,
               "max_steps": args.max_steps, "lr": cfg.lr}
    write_json(args.out / "summary.json", summary)

    start = time.time()
    model, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, pretrained=True,
                                                device=device, seed=exp.seed)
    result = train_causal_lm(
        model, tokenizer, mwp2eq_examples(train), epochs=1, batch_size=args.batch_size, lr=cfg.lr,
        max_length=cfg.max_length, seed=exp.seed, device=device, mixed_precision=params.train.mixed_precision,
        checkpoint_dir=args.models / "mwp2eq", log_every=params.train.log_every, max_steps=args.max_steps,
        grad_accum=1, validation=mwp2eq_examples(validation), eval_every=100, patience=cfg.patience,
        save_every=0, on_log=lambda rec: print(f"step {rec['step']} loss {rec['train_loss']:.4f}", flush=True))
    summary["train"] = {"wall_s": round(time.time() - start, 1), "steps": result.get("steps"),
                        "best_step": result.get("best_step"), "best_val_loss": result.get("best_val_loss")}
    write_json(args.out / "summary.json", summary)

    parser, tok = load_trained(args.models / "mwp2eq", device)
    arithmetic = load_fold(args.data, "arithmetic", args.fold, seed=exp.seed, validation_size=exp.validation_size)
    for name, rows in (("arithmetic_validation", arithmetic.validation), ("arithmetic_test", arithmetic.test)):
        parsed = predict_equations(parser, tok, [r["text"] for r in rows], batch_size=params.generate.batch_size)
        refs = [r["equation"] for r in rows]
        summary[name] = {"n": len(rows), "acc_eq": acc_eq(parsed, refs), "acc_eq_equivalent": acc_eq(
            parsed, refs, equivalent_too=True)}
        write_json(args.out / "summary.json", summary)
        print(name, summary[name], flush=True)

    start = time.time()
    with args.labels.open(encoding="utf-8", newline="") as f:
        labelled = list(csv.DictReader(f))
    feats = judge.features(parser, tok, [r["problem"] for r in labelled], [r["equation"] for r in labelled])
    write_jsonl(args.out / "features.jsonl", [{"uid": r["uid"], **vars(f)} for r, f in zip(labelled, feats)])
    summary["features"] = {"n": len(feats), "wall_s": round(time.time() - start, 1),
                           "exact_share": sum(f.exact for f in feats) / len(feats),
                           "equivalent_share": sum(f.equivalent for f in feats) / len(feats)}
    write_json(args.out / "summary.json", summary)
    print("features", summary["features"], flush=True)


if __name__ == "__main__":
    main()
