"""fp32 vs bf16 autocast for causal-LM training: step time, tokens/s and FLOP rate side by side, and whether the
two precisions train the same (loss curves of the real trainer from the same seed and data).

    python -m benchmarks.bench_precision                    # SmolLM2-135M
    python -m benchmarks.bench_precision --model tiny --steps 3 --curve-steps 6

1. Step time. One model, one AdamW; a training step (forward, lm_loss, backward, clip, Adam step: what
   mwpgen/lm/training.py does) on a fixed batch of `--batch` x `--seq` random tokens (no padding), under
   torch.autocast(bf16) or in fp32. The arms are timed interleaved (fp32 bf16 bf16 fp32 fp32 bf16 ...: the order
   alternates each round) so that load drift on a shared machine hits both alike; `--warmup` rounds are not
   timed; the median of `--steps` is reported. tokens/s = batch x seq / step time. FLOP rate = 6 x params x
   tokens / step time ("params" are matmul weights: a tied input embedding counts once, as the LM head; attention
   scores ignored), and its share of a dense n x n matmul measured in the arm's dtype in the same process.
2. Curves. `train_causal_lm` (the pipeline's trainer) run twice from the same pre-trained weights, seed and data
   (`--curve-steps` steps at batch `--curve-batch` of real "problem -> equation" examples from
   data/processed/<dataset>.jsonl when present, else a synthetic set), with mixed_precision false (fp32) and true
   (bf16 autocast where the CPU supports it: mwpgen.device.autocast_dtype), plus the validation loss on
   `--curve-val` held-out examples every 5 steps. Reported: the max absolute difference of the per-step training
   losses and of the validation losses.

Library only (no Prefect, MLflow or DVC). `--out` writes every number as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.flops import matmul_params, matmul_rate, sync
from mwpgen.device import autocast_dtype, cpu_supports_bf16
from mwpgen.io import read_jsonl
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.prompts import mwp2eq_example
from mwpgen.lm.training import lm_loss, train_causal_lm
from tests.helpers.tiny_model import tiny_model_dir

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = [("Joan found num1 shells . She gave num2 away . How many are left ?", "x = ( num1 - num2 )"),
             ("Tom has num1 boxes with num2 candies each . How many candies ?", "x = ( num1 * num2 )"),
             ("A jar holds num1 marbles . Sam adds num2 . How many now ?", "x = ( num1 + num2 )"),
             ("num1 dollars are shared by num2 kids . How much each ?", "x = ( num1 / num2 )")]


def curve_examples(dataset: str, n: int):
    """`n` real problem -> equation examples (the evaluator's task), in file order, or a cycled synthetic set."""
    path = ROOT / "data" / "processed" / f"{dataset}.jsonl"
    if path.exists():
        records = read_jsonl(path)[:n]
        return [mwp2eq_example(r["text"], r["equation"]) for r in records], str(path.relative_to(ROOT))
    return [mwp2eq_example(*SYNTHETIC[i % len(SYNTHETIC)]) for i in range(n)], "synthetic"


def time_steps(model, device, args) -> dict[str, list[float]]:
    """Step times of both arms, interleaved with alternating order (module docstring, 1)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.seq), generator=g).to(device)
    mask = torch.ones_like(ids)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    model.train()

    def step(dtype):
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = lm_loss(model(input_ids=ids, attention_mask=mask).logits, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    arms = {"fp32": None, "bf16": torch.bfloat16}
    times: dict[str, list[float]] = {k: [] for k in arms}
    for r in range(args.warmup + args.steps):
        order = list(arms) if r % 2 == 0 else list(arms)[::-1]
        for name in order:
            sync(device)
            t = time.perf_counter()
            step(arms[name])
            sync(device)
            if r >= args.warmup:
                times[name].append(time.perf_counter() - t)
    return times


def compare_curves(spec: str, args, device) -> dict:
    n_train, n_val = args.curve_steps * args.curve_batch, args.curve_val
    examples, source = curve_examples(args.dataset, n_train + n_val)
    train, val = examples[:n_train], examples[n_train:]
    runs = {}
    for name, mixed in (("fp32", False), ("bf16", True)):
        model, tok = load_model_and_tokenizer(spec, args.cache_dir, device=device)
        t = time.perf_counter()
        runs[name] = train_causal_lm(model, tok, train, epochs=1, batch_size=args.curve_batch, lr=args.curve_lr,
                                     max_length=128, seed=0, device=device, mixed_precision=mixed,
                                     log_every=10**6, validation=val, eval_every=5, max_steps=0, grad_accum=1,
                                     patience=0, save_every=10)
        runs[name]["wall"] = time.perf_counter() - t
        del model
    return {"source": source, "batch": args.curve_batch, "lr": args.curve_lr, "n_val": len(val),
            "precision": {k: r["precision"] for k, r in runs.items()},
            "train_loss": {k: [h["train_loss"] for h in r["history"]] for k, r in runs.items()},
            "val_loss": {k: [(v["step"], v["val_loss"]) for v in r["validations"]] for k, r in runs.items()},
            "wall_s": {k: round(r["wall"], 1) for k, r in runs.items()},
            **agreement(*([h["train_loss"] for h in runs[k]["history"]] for k in ("fp32", "bf16")),
                        *([v["val_loss"] for v in runs[k]["validations"]] for k in ("fp32", "bf16")))}


def agreement(fp32: list[float], bf16: list[float], val_fp32: list[float], val_bf16: list[float],
              window: int = 5) -> dict:
    """How far the two curves are apart: per step (step 1 = the same weights, so bf16's own forward error; later
    steps add the drift of two trajectories), over `window`-step means (the per-step noise of a small batch
    averaged out), and on the validation loss (a fixed set)."""
    diffs = [abs(x - y) for x, y in zip(fp32, bf16)]
    def means(xs):
        return [sum(xs[i : i + window]) / len(xs[i : i + window]) for i in range(0, len(xs), window)]

    return {"steps": len(diffs), "first_step_abs_diff": diffs[0], "max_abs_diff_train": max(diffs),
            "mean_abs_diff_train": sum(diffs) / len(diffs),
            "max_rel_diff_train": max(d / abs(x) for d, x in zip(diffs, fp32)),
            f"max_abs_diff_train_{window}_step_means": max(abs(x - y) for x, y in zip(means(fp32), means(bf16))),
            "max_abs_diff_val": max(abs(x - y) for x, y in zip(val_fp32, val_bf16)),
            "loss_drop": {"fp32": fp32[0] - fp32[-1], "bf16": bf16[0] - bf16[-1]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m (default), tiny, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=80, help="tokens per sequence of the timed batch")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per arm")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    ap.add_argument("--matmul-n", type=int, default=2048)
    ap.add_argument("--curve-steps", type=int, default=20, help="steps of the fp32 / bf16 loss curves (0: skip)")
    ap.add_argument("--curve-batch", type=int, default=4)
    ap.add_argument("--curve-val", type=int, default=16, help="held-out examples for the validation curve")
    ap.add_argument("--curve-lr", type=float, default=None, help="default 5e-5 (tiny: 1e-3)")
    ap.add_argument("--dataset", default="arithmetic", help="data/processed/<dataset>.jsonl feeds the curves")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; tiny: 1)")
    ap.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads or (1 if args.model == "tiny" else torch.get_num_threads()))
    args.curve_lr = args.curve_lr or (1e-3 if args.model == "tiny" else 5e-5)
    device = torch.device(args.device)

    tmp = tempfile.TemporaryDirectory()
    if args.model == "tiny":
        examples, _ = curve_examples(args.dataset, max(args.curve_steps, 1) * args.curve_batch + args.curve_val)
        spec = str(tiny_model_dir(Path(tmp.name) / "tiny", [e.prompt + " " + e.target for e in examples]))
    else:
        spec = DEFAULT_MODEL if args.model == "smollm2-135m" else args.model
    model, _ = load_model_and_tokenizer(spec, args.cache_dir, device=device)
    n_params, n_mm = sum(p.numel() for p in model.parameters()), matmul_params(model)
    print(
        f"model {args.model}: {n_params:,} params ({n_mm:,} matmul); {device}, "
        f"{torch.get_num_threads()} threads; torch {torch.__version__}; {platform.processor() or platform.machine()}; "
        f"native CPU bf16: {cpu_supports_bf16()}; mixed_precision=true trains in "
        f"{autocast_dtype(device, True) or 'fp32'}",
        flush=True,
    )

    times = time_steps(model, device, args)
    del model
    reps = 10 if device.type == "cuda" else 5
    peak = {"fp32": matmul_rate(device, torch.float32, args.matmul_n, reps),
            "bf16": matmul_rate(device, torch.bfloat16, args.matmul_n, reps)}
    tokens = args.batch * args.seq
    report = {"model": args.model, "params": n_params, "matmul_params": n_mm, "device": str(device),
              "threads": torch.get_num_threads(), "torch": torch.__version__, "batch": args.batch, "seq": args.seq,
              "steps": args.steps, "native_cpu_bf16": cpu_supports_bf16(), "arms": {}}
    print(f"\nstep: batch {args.batch} x {args.seq} tokens, median of {args.steps} (interleaved, {args.warmup} "
          f"warm-up); dense matmul {args.matmul_n}^2: fp32 {peak['fp32'] / 1e9:.1f}, bf16 {peak['bf16'] / 1e9:.1f} "
          "GFLOP/s")
    for name in ("fp32", "bf16"):
        t = statistics.median(times[name])
        rate = 6 * n_mm * tokens / t
        report["arms"][name] = {"step_s": t, "tokens_per_s": tokens / t, "flop_per_s": rate,
                                "matmul_flop_per_s": peak[name], "share_of_matmul": rate / peak[name],
                                "steps_s": times[name]}
        print(f"{name:>5}: {t:7.3f} s/step  {tokens / t:7.1f} tok/s  {rate / 1e9:7.1f} GFLOP/s = "
              f"{rate / peak[name]:.1%} of its dtype's matmul  [{', '.join(f'{x:.2f}' for x in times[name])}]")
    speedup = report["arms"]["fp32"]["step_s"] / report["arms"]["bf16"]["step_s"]
    report["bf16_speedup"] = speedup
    print(f"bf16 autocast: x{speedup:.2f} the fp32 step rate")

    if args.curve_steps:
        print(f"\ncurves: {args.curve_steps} steps at batch {args.curve_batch}, lr {args.curve_lr:g}, same seed "
              "and data, fp32 vs mixed_precision", flush=True)
        curves = compare_curves(spec, args, device)
        report["curves"] = curves
        fp, bf = curves["train_loss"]["fp32"], curves["train_loss"]["bf16"]
        print(f"data: {curves['source']}; precision {curves['precision']}; wall {curves['wall_s']}")
        print("step  fp32 loss  bf16 loss  |diff|")
        for i, (x, y) in enumerate(zip(fp, bf), start=1):
            print(f"{i:4d}  {x:9.4f}  {y:9.4f}  {abs(x - y):.4f}")
        print("val: " + "  ".join(f"step {s}: {x:.4f} / {y:.4f}" for (s, x), (_, y)
                                   in zip(curves["val_loss"]["fp32"], curves["val_loss"]["bf16"])))
        print(
            f"train loss |fp32 - bf16|: step 1 (same weights) {curves['first_step_abs_diff']:.4f}; max "
            f"{curves['max_abs_diff_train']:.4f} (max relative {curves['max_rel_diff_train']:.2%}), mean "
            f"{curves['mean_abs_diff_train']:.4f}; of 5-step means max "
            f"{curves['max_abs_diff_train_5_step_means']:.4f}; "
            f"loss drop over the run fp32 {curves['loss_drop']['fp32']:.3f}, bf16 {curves['loss_drop']['bf16']:.3f}; "
            f"val loss max |diff| {curves['max_abs_diff_val']:.4f}"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
