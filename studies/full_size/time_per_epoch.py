"""What the default profile would cost on one WHOLE training fold (issue 26's full-size estimate for Math23K):
minutes per epoch of each model, measured on a few optimizer steps of the real examples and extrapolated.

    python -m studies.full_size.time_per_epoch --dataset math23k --fold 0 --steps 20 --out studies/full_size/<machine>

Library only (no Prefect, MLflow or DVC), so it runs on a bare GPU machine as well as here. For each model it
builds the stage's own training examples from the whole training fold (no subsample; the validation slice held
out as the stages hold it out) with params.yaml's settings: the evaluator's (flows/train_evaluator.py), GPT's and
GPT-pre's (flows/train_generator.py: the fold's noun keywords with dropout; GPT from random weights), ours'
(flows/train_ours.py: the selector's keyword warm start, then phase 1 and phase 2). It runs `--warmup` + `--steps`
optimizer steps of each and extrapolates:

    minutes per epoch = mean step time after the warm-up steps x steps per epoch
    the default schedule = epochs (params.yaml's caps) x minutes per epoch

Left out, and said so in the output: validation passes, checkpoint writes and early stopping (a real run stops at
or before its cap). Generating the whole test fold (flows/generate.py's decoding settings, GPT-pre) and parsing it
(flows/evaluate.py: the evaluator reads every generated problem) are timed on `--generate` test problems and
extrapolated per problem. Each model's row is written to summary.json as soon as it is measured.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path

import torch

from mwpgen.config.schema import load_params
from mwpgen.data.folds import load_fold
from mwpgen.device import resolve_device
from mwpgen.io import read_jsonl, write_json
from mwpgen.lm import decoding
from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.prompts import generator_epochs, generator_prompt, mwp2eq_examples
from mwpgen.lm.training import train_causal_lm
from mwpgen.ours.inputs import epoch_examples
from mwpgen.ours.train_and_save import build_models, warm_start_selector
from mwpgen.ours.training import train_joint


def epoch_row(step_times: list[float], warmup: int, steps_per_epoch: int, epochs: int, **extra) -> dict:
    """One model's (or phase's) extrapolation from its step times; the first `warmup` are left out (kernel
    selection, the allocator's growth) unless no other step was run."""
    timed = step_times[warmup:] or step_times
    mean = statistics.mean(timed)
    return {"steps_timed": len(timed), "step_s_mean": round(mean, 4),
            "step_s_median": round(statistics.median(timed), 4), "steps_per_epoch": steps_per_epoch,
            "min_per_epoch": round(mean * steps_per_epoch / 60, 2), "schedule_epochs": epochs,
            "schedule_min": round(mean * steps_per_epoch * epochs / 60, 1), **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"), help="the settings timed (train.*, generate)")
    ap.add_argument("--data", type=Path, default=Path("data"), help="holds processed/, splits/ and keywords/")
    ap.add_argument("--dataset", default="math23k")
    ap.add_argument("--fold", type=int, default=0)
    ap.add_argument("--steps", type=int, default=20, help="timed optimizer steps per model (per phase for ours)")
    ap.add_argument("--warmup", type=int, default=3, help="steps run before the timed ones")
    ap.add_argument(
        "--generate", type=int, default=64, help="test problems generated and parsed for the per-problem time"
    )
    ap.add_argument("--models", nargs="+", default=["evaluator", "gpt", "gpt_pre", "ours"],
                    choices=["evaluator", "gpt", "gpt_pre", "ours"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    params = load_params(args.params)
    exp, g, train = params.experiment, params.generate, params.train
    device = resolve_device(train.device)
    data = load_fold(args.data, args.dataset, args.fold, 0, 0, exp.seed, validation_size=exp.validation_size)
    keywords = {r["id"]: r for r in read_jsonl(args.data / "keywords" / args.dataset / f"fold{args.fold}.jsonl")}
    noun = {i: r[params.keywords.baseline_context] for i, r in keywords.items()}
    cpu = platform.processor() or platform.machine()
    summary = {
        "dataset": args.dataset,
        "fold": args.fold,
        "n_train": len(data.train),
        "n_validation": len(data.validation),
        "n_test": len(data.test),
        "device": torch.cuda.get_device_name() if device == "cuda" else cpu,
        "torch": torch.__version__,
        "model": train.model,
        "steps": args.steps,
        "warmup": args.warmup,
        "left_out": "validation passes, checkpoint writes, early stopping",
        "models": {},
    }
    args.out.mkdir(parents=True, exist_ok=True)

    def record(name: str, row: dict) -> None:
        summary["models"][name] = row
        if device == "cuda":
            summary["peak_gpu_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        write_json(args.out / "summary.json", summary)
        print(f"{name}: {json.dumps(row)}", flush=True)

    def time_causal_lm(cfg, examples, pretrained: bool):
        model, tokenizer = load_model_and_tokenizer(train.model, DEFAULT_MODEL_CACHE, pretrained=pretrained,
                                                    device=device, seed=exp.seed)
        stamps = [time.perf_counter()]
        result = train_causal_lm(
            model, tokenizer, examples, epochs=1, batch_size=cfg.batch_size, lr=cfg.lr, max_length=cfg.max_length,
            seed=exp.seed, device=device, mixed_precision=train.mixed_precision, log_every=10**9,
            max_steps=args.warmup + args.steps, grad_accum=cfg.grad_accum, eval_every=0, patience=0, save_every=0,
            on_step=lambda step: stamps.append(time.perf_counter()))
        step_times = [b - a for a, b in zip(stamps, stamps[1:])]
        steps_per_epoch = math.ceil(len(data.train) / (cfg.batch_size * cfg.grad_accum))
        return model, tokenizer, epoch_row(step_times, args.warmup, steps_per_epoch, cfg.epochs,
                                           precision=result["precision"])

    tests = data.test[: args.generate]
    if "evaluator" in args.models:
        evaluator, ev_tok, row = time_causal_lm(train.evaluator, mwp2eq_examples(data.train), True)
        start = time.perf_counter()
        decoding.predict_equations(evaluator, ev_tok, [r["text"] for r in tests], batch_size=g.batch_size)
        per_problem = (time.perf_counter() - start) / len(tests)
        row["parse_s_per_problem"] = round(per_problem, 4)
        row["parse_test_fold_min"] = round(per_problem * len(data.test) / 60, 1)  # evaluate: one model's problems
        record("evaluator", row)
        del evaluator
    generator_examples = generator_epochs(data.train, noun, p=params.keywords.dropout, seed=exp.seed)
    for name in ("gpt", "gpt_pre"):
        if name not in args.models:
            continue
        model, tokenizer, row = time_causal_lm(train.generator, generator_examples, pretrained=name == "gpt_pre")
        if name == "gpt_pre":
            prompts = [generator_prompt(r["equation"], noun[r["id"]]) for r in tests]
            start = time.perf_counter()
            decoding.generate_texts(model, tokenizer, prompts, batch_size=g.batch_size, decoding=g.decoding,
                                    num_beams=g.num_beams, top_p=g.top_p, temperature=g.temperature,
                                    max_new_tokens=g.max_new_tokens, seed=exp.seed)
            per_problem = (time.perf_counter() - start) / len(tests)
            row["generate_s_per_problem"] = round(per_problem, 4)
            row["generate_test_fold_min"] = round(per_problem * len(data.test) / 60, 1)
        record(name, row)
        del model
    if "ours" in args.models:
        cfg = train.ours
        cfg = cfg.model_copy(update={"phase1": cfg.phase1.model_copy(update={"max_steps": args.warmup + args.steps}),
                                     "phase2": cfg.phase2.model_copy(update={"max_steps": args.warmup + args.steps})})
        context = {i: r[cfg.context] for i, r in keywords.items()} if cfg.context != "selector" else None
        examples = epoch_examples(data.train, context, params.keywords.dropout, exp.seed)
        models = build_models(cfg, train.model, device=device, seed=exp.seed, mixed_precision=train.mixed_precision)
        warm_start_s = None
        if models.selector is not None and cfg.selector_init == "keywords":
            start = time.perf_counter()
            warm_start_selector(models, cfg, examples(1, 0), [keywords[r["id"]]["tfidf"] for r in data.train])
            warm_start_s = round(time.perf_counter() - start, 1)
        result = train_joint(models, examples, cfg, seed=exp.seed, log_every=10**9, dropout=params.keywords.dropout)
        steps_per_epoch = math.ceil(len(data.train) / cfg.batch_size)
        row = {"selector_warm_start_s": warm_start_s}
        for phase, phase_cfg in ((1, cfg.phase1), (2, cfg.phase2)):
            times = [h["step_s"] for h in result["history"] if h["phase"] == phase]
            row[f"phase{phase}"] = epoch_row(times, args.warmup, steps_per_epoch, phase_cfg.epochs)
        row["schedule_min"] = round(row["phase1"]["schedule_min"] + row["phase2"]["schedule_min"]
                                    + (warm_start_s or 0) / 60, 1)
        record("ours", row)


if __name__ == "__main__":
    main()
