"""A plain causal-LM training step (what train_lm does; ours' steps are built of such passes), eager against
torch.compile (inductor; on CPU it writes C++ kernels with the machine's compiler), side by side.

    python -m studies.speed.bench_compile --model smollm2-135m --steps 4 --batch 8 --lengths 128
    python -m studies.speed.bench_compile --model smollm2-135m --steps 6 --batch 8 --lengths 96 128 112
    python -m studies.speed.bench_compile --model MODEL --device cuda --mode reduce-overhead --steps 20 --batch 8

`--mode` is torch.compile's: on a GPU, reduce-overhead replays the step's kernels as CUDA graphs, which is what a
launch-bound step (SmolLM2-135M at batch 8) needs; fused AdamW (`--fused-adam`, CUDA only) for both arms.

Two copies of the same weights, each with its own AdamW; the same batches (random token ids, seeded) feed both, in
turn (eager, compiled, eager, ...). `--lengths`: the sequence length of each step in turn, as length-grouped batches
vary it; a second distinct length makes torch.compile recompile once with dynamic shapes. Printed: the compile
time (first steps of each new shape), the median step time of each arm over the timed steps, their ratio, and the
losses of both, step by step (bf16 autocast where the CPU has native bf16, and on CUDA: the arms differ by rounding
only), and each arm's FLOP rate as a share of a dense matmul's measured in the same run (6 x matmul params x tokens a
step).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.flops import matmul_params, matmul_rate, sync
from benchmarks.machine import describe
from mwpgen.device import autocast_dtype
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.training import lm_loss


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per arm (after each length's first step)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lengths", type=int, nargs="+", default=[128], help="sequence length of each step, cycled")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--mode", default="default", choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
                    help="torch.compile's mode")
    ap.add_argument("--fused-adam", action="store_true", help="AdamW(fused=True) in both arms (CUDA)")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    amp = autocast_dtype(device, mixed_precision=True)
    spec = DEFAULT_MODEL if args.model == "smollm2-135m" else args.model
    arms = {}
    for name in ("eager", "compiled"):
        torch.manual_seed(0)
        model, _tok = load_model_and_tokenizer(spec, args.cache_dir, device=device)
        model.train()
        arms[name] = (model, torch.compile(model, mode=args.mode) if name == "compiled" else model,
                      torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0,
                                        **({"fused": True} if args.fused_adam else {})))
    vocab = arms["eager"][0].get_input_embeddings().weight.shape[0]
    data = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, vocab, (args.batch, args.lengths[i % len(args.lengths)]), generator=data)
               for i in range(len(set(args.lengths)) + args.steps)]
    batches = [b.to(device) for b in batches]

    def step(name: str, ids: torch.Tensor) -> tuple[float, float]:
        model, forward, opt = arms[name]
        sync(device)
        began = time.perf_counter()
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = lm_loss(forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        return time.perf_counter() - began, float(loss.detach())

    warm = len(set(args.lengths))  # each distinct length's first step: compiling (eager: allocator warm-up)
    times: dict[str, list[float]] = {name: [] for name in arms}
    losses: dict[str, list[float]] = {name: [] for name in arms}
    first: dict[str, float] = {name: 0.0 for name in arms}
    for i, ids in enumerate(batches):
        for name in arms:
            seconds, loss = step(name, ids)
            losses[name].append(loss)
            if i < warm:
                first[name] += seconds
            else:
                times[name].append(seconds)
    reference = matmul_rate(device, amp or torch.float32, 8192 if device.type == "cuda" else 1024, reps=10)
    timed_tokens = [b.numel() for b in batches[warm:]]
    flop = 6 * matmul_params(arms["eager"][0]) * statistics.mean(timed_tokens)
    print(f"machine: {describe()}" + (f"; GPU {torch.cuda.get_device_name()}, torch {torch.__version__}"
                                      if device.type == "cuda" else ""))
    print(f"model {args.model}, batch {args.batch}, lengths {args.lengths}, {amp or 'fp32'}, "
          f"threads {torch.get_num_threads()}, torch.compile mode {args.mode}, fused AdamW {args.fused_adam}")
    print(f"dense matmul reference: {reference / 1e9:.1f} GFLOP/s")
    for name in arms:
        median = statistics.median(times[name])
        print(f"{name:>9}: first step of each length {first[name]:7.1f} s in all; timed steps median "
              f"{median * 1000:.1f} ms, {flop / median / 1e9:.1f} GFLOP/s = {100 * flop / median / reference:.1f} % "
              f"of the matmul rate [{', '.join(f'{t * 1000:.0f}' for t in times[name])} ms]")
    print(f"compiled / eager: x{statistics.median(times['compiled']) / statistics.median(times['eager']):.3f}")
    for name in arms:
        print(f"{name:>9} losses: {' '.join(f'{x:.4f}' for x in losses[name])}")
    gaps = [abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])]
    print(f"largest loss difference between the arms: {max(gaps):.4f}")


if __name__ == "__main__":
    main()
