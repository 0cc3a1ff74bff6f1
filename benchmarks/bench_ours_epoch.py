"""Time per epoch of "ours", trained for real (phase 1 then phase 2) on one full training fold, and its test
generations: the issue's GPU check, beside the paper's 1.3 min/epoch (GPT-2 large, RTX 8000, Arithmetic/MAWPS).

    python -m benchmarks.bench_ours_epoch --dataset arithmetic --fold 0 --phase1-epochs 3 --phase2-epochs 3 \
        --out studies/gpu/smollm2-135m
    python -m benchmarks.bench_ours_epoch --dataset arithmetic --fold 0 --random-arch gpt2-large \
        --max-steps 20 --out studies/gpu/gpt2-large-shape            # the paper's model size: timing only
    python -m studies.gpu.score_generations studies/gpu/smollm2-135m/generations.csv --dataset arithmetic --fold 0

Library only (no Prefect, MLflow or DVC), so that it runs on a bare GPU machine with torch and transformers; the
`train_ours` stage trains the same objective through tasks/ours.py with the settings of params.yaml. Here the
settings are the paper profile's (profiles/paper.yaml: batch 8, lr 5e-5, max_problem_tokens 200, full training
fold) with fewer epochs, on the default model; CUDA trains under bf16 autocast (fp32 master weights) unless
--precision fp32.

Time per epoch = the summed wall time of the phase's optimizer steps (encoding the epoch's examples excluded;
every step ends in a host sync, `float(loss)`) divided by its epochs. With --max-steps the phase is cut short and
its per-epoch time is extrapolated from the mean step time after `--warmup-steps` (CUDA kernel selection, the
allocator's first growth). --random-arch builds a randomly initialised model of a named size around the same
tokenizer, for timing at the paper's model size when its weights are not at hand; no generations then.

--selector picks the selector's form (mwpgen/ours/selector.py: eq5 as the paper writes it, or the residual form
that is the pipeline's default) and --selector-lr its own learning rate (0 = lr); --rho is its prior.
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

from mwpgen.config.schema import OursTrainParams
from mwpgen.data.folds import load_fold
from mwpgen.data.keywords import KEYWORD_DROPOUT
from mwpgen.io import write_generations
from mwpgen.lm.loading import (
    DEFAULT_MODEL,
    DEFAULT_MODEL_CACHE,
    convert_gguf,
    load_model_and_tokenizer,
    prepare_tokenizer,
)
from mwpgen.ours import training
from mwpgen.ours.bundle import generate_with_context
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.ours.joint_step import JointModels
from mwpgen.ours.selector import SELECTOR_FORMS, ContextSelector, selector_batch
from mwpgen.ours.training import train_joint

# Shapes of the GPT-2 family (Radford et al. 2019; HF gpt2-* configs); the paper fine-tunes gpt2-large.
RANDOM_ARCHS = {"gpt2": (768, 12, 12), "gpt2-medium": (1024, 24, 16), "gpt2-large": (1280, 36, 20)}


def load_models(spec: str, cache_dir: Path, device: str, seed: int, random_arch: str | None):
    """(generator, mwp2eq, tokenizer): both from the pre-trained LM (mwp2eq_init: pretrained), or both randomly
    initialised at `random_arch`'s size around the spec's tokenizer. A .gguf path is converted once."""
    if spec.endswith(".gguf"):
        gguf = Path(spec)
        out = Path(cache_dir) / gguf.stem.lower()
        if not (out / "config.json").exists():
            convert_gguf(gguf, out)
        spec = str(out)
    if random_arch is None:
        generator, tokenizer = load_model_and_tokenizer(spec, cache_dir, device=device)
        mwp2eq, _ = load_model_and_tokenizer(spec, cache_dir, device=device)
        return generator, mwp2eq, tokenizer
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tokenizer = load_model_and_tokenizer(spec, cache_dir, device="cpu")
    hidden, layers, heads = RANDOM_ARCHS[random_arch]
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=hidden, n_layer=layers, n_head=heads, n_positions=1024,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    models = []
    for offset in (0, 1):
        torch.manual_seed(seed + offset)
        with torch.device(device):  # initialise in place: a 774M model's CPU init alone takes tens of seconds
            models.append(GPT2LMHeadModel(config))
    return models[0], models[1], prepare_tokenizer(tokenizer)


def phase_summary(history: list[dict], phase: int, steps_per_epoch: int, warmup: int) -> dict:
    """The pipeline's phase summary (losses over the last epoch's steps), with minutes per epoch from the step
    times after `warmup` steps (left out of an extrapolation)."""
    out = training.phase_summary(history, phase, steps_per_epoch, window=steps_per_epoch)
    if not out:
        return {}
    times = [h["step_s"] for h in history if h["phase"] == phase]
    timed = times[warmup:] if len(times) > warmup else times
    return {**out, "step_s_mean": statistics.mean(timed), "step_s_median": statistics.median(timed),
            "wall_s_steps": sum(times),
            "min_per_epoch": statistics.mean(timed) * steps_per_epoch / 60}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("data"), help="holds processed/<dataset>.jsonl and splits/")
    ap.add_argument("--dataset", default="arithmetic")
    ap.add_argument("--fold", type=int, default=0)
    ap.add_argument("--model", default=DEFAULT_MODEL, help="smollm2-135m, an HF id, a local folder or a .gguf file")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--random-arch", choices=sorted(RANDOM_ARCHS), help="timing only: a random model of this size")
    ap.add_argument("--phase1-epochs", type=int, default=1)
    ap.add_argument("--phase2-epochs", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=0, help="cap each phase at this many steps (0: whole epochs)")
    ap.add_argument("--warmup-steps", type=int, default=2, help="steps left out of an extrapolated step time")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--max-problem-tokens", type=int, default=200)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-test", type=int, default=100, help="test problems to generate (0: the whole test fold)")
    ap.add_argument("--seed", type=int, default=2021)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--precision", choices=["bf16", "fp32"], default="bf16", help="bf16 autocast applies on CUDA")
    ap.add_argument("--selector", choices=SELECTOR_FORMS, default="eq5", help="the selector's form")
    ap.add_argument("--selector-lr", type=float, default=0.0, help="the selector's learning rate (0: lr)")
    ap.add_argument("--rho", type=float, default=0.1, help="the selector's prior (residual: its starting q)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    device = "cuda" if args.device == "auto" and torch.cuda.is_available() else (
        "cpu" if args.device == "auto" else args.device)
    amp = torch.bfloat16 if device == "cuda" and args.precision == "bf16" else None
    fold = load_fold(args.data, args.dataset, args.fold, 0, args.max_test, args.seed)
    t_load = time.perf_counter()
    generator, mwp2eq, tokenizer = load_models(args.model, args.cache_dir, device, args.seed, args.random_arch)
    torch.manual_seed(args.seed)
    selector = ContextSelector.from_model(generator, args.selector, args.rho).to(device)
    models = JointModels(generator, mwp2eq, tokenizer, selector, amp)
    models.check()
    load_s = time.perf_counter() - t_load
    # train.ours' defaults (mwpgen/config/schema.py) but for the flags; no validation slice, so no early stopping.
    cfg = OursTrainParams(phase1={"epochs": args.phase1_epochs, "max_steps": args.max_steps},
                          phase2={"epochs": args.phase2_epochs, "max_steps": args.max_steps},
                          batch_size=args.batch_size, lr=args.lr, selector_lr=args.selector_lr, selector=args.selector,
                          rho=args.rho, max_problem_tokens=args.max_problem_tokens, max_length=args.max_length)
    examples = [JointExample(r["equation"], r["text"]) for r in fold.train]
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    result = train_joint(models, examples, cfg, seed=args.seed, log_every=25, dropout=KEYWORD_DROPOUT)
    steps_per_epoch = math.ceil(len(examples) / args.batch_size)
    summary = {
        "dataset": args.dataset, "fold": args.fold, "n_train": len(examples), "steps_per_epoch": steps_per_epoch,
        "model": args.model, "random_arch": args.random_arch,
        "params_generator": sum(p.numel() for p in generator.parameters()),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "precision": "bf16 autocast" if amp else "fp32", "torch": torch.__version__,
        "settings": {k: str(v) for k, v in vars(args).items()}, "load_s": load_s,
        "train_wall_s": result["timing"]["wall_s"],
        "phase1": phase_summary(result["history"], 1, steps_per_epoch, args.warmup_steps),
        "phase2": phase_summary(result["history"], 2, steps_per_epoch, args.warmup_steps),
        "peak_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    if args.random_arch is None:
        tests = [JointExample(r["equation"], r["text"]) for r in fold.test]
        t_gen = time.perf_counter()
        texts, contexts = generate_with_context(generator, tokenizer, selector, tests, width=cfg.context_tokens,
                                                max_problem_tokens=args.max_problem_tokens, seed=args.seed)
        summary["generate_s"] = time.perf_counter() - t_gen
        write_generations(args.out / "generations.csv",
                          ({"fold": args.fold, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                            "reference": r["text"], "generated": g} for r, c, g in zip(fold.test, contexts, texts)))
        encoded = [encode_joint(tokenizer, ex, args.max_problem_tokens) for ex in tests]
        with torch.no_grad():
            sel = selector_batch([e.problem for e in encoded], tokenizer.pad_token_id, device)
            q = selector(**sel)[sel["candidate"]].float()
        n_words = [len(c) for c in contexts]
        summary["test_selection"] = {"q_mean": float(q.mean()), "q_min": float(q.min()), "q_max": float(q.max()),
                                     "frac_candidates_selected": float((q > 0.5).float().mean()),
                                     "words_per_problem_mean": statistics.mean(n_words),
                                     "problems_with_none": sum(n == 0 for n in n_words)}
    (args.out / "history.json").write_text(json.dumps(result["history"]) + "\n", encoding="utf-8")
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    for phase in ("phase1", "phase2"):
        s = summary[phase]
        if s:
            print(f"{phase}: {s['steps']} steps, {s['step_s_mean']:.3f} s/step, {s['min_per_epoch']:.2f} min/epoch "
                  f"({summary['device']}, {summary['precision']}, {summary['params_generator'] / 1e6:.0f}M params)")
    print(json.dumps({k: v for k, v in summary.items() if k != "settings"}, indent=2))


if __name__ == "__main__":
    main()
