"""A plain causal-LM training step (what train_lm does; ours' steps are built of such passes), eager against
torch.compile (inductor; on CPU it writes C++ kernels with the machine's compiler), side by side.

    python -m benchmarks.bench_compile --model smollm2-135m --steps 4 --batch 8 --lengths 128
    python -m benchmarks.bench_compile --model smollm2-135m --steps 6 --batch 8 --lengths 96 128 112

Two copies of the same weights, each with its own AdamW; the same batches (random token ids, seeded) feed both, in
turn (eager, compiled, eager, ...). `--lengths`: the sequence length of each step in turn, as length-grouped batches
vary it; a second distinct length makes torch.compile recompile once with dynamic shapes. Printed: the compile
time (first steps of each new shape), the median step time of each arm over the timed steps, their ratio, and the
losses of both, step by step (bf16 autocast where the CPU has native bf16: the arms differ by rounding only).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.machine import describe
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.training import lm_loss
from mwpgen.runtime import autocast_dtype


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per arm (after each length's first step)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lengths", type=int, nargs="+", default=[128], help="sequence length of each step, cycled")
    args = ap.parse_args(argv)
    device = torch.device("cpu")
    amp = autocast_dtype(device, mixed_precision=True)
    spec = DEFAULT_MODEL if args.model == "smollm2-135m" else args.model
    arms = {}
    for name in ("eager", "compiled"):
        torch.manual_seed(0)
        model, _tok = load_model_and_tokenizer(spec, args.cache_dir, device=device)
        model.train()
        arms[name] = (model, torch.compile(model) if name == "compiled" else model,
                      torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0))
    vocab = arms["eager"][0].get_input_embeddings().weight.shape[0]
    data = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, vocab, (args.batch, args.lengths[i % len(args.lengths)]), generator=data)
               for i in range(len(set(args.lengths)) + args.steps)]

    def step(name: str, ids: torch.Tensor) -> tuple[float, float]:
        model, forward, opt = arms[name]
        began = time.perf_counter()
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            loss = lm_loss(forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits, ids)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
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
    print(f"machine: {describe()}")
    print(f"model {args.model}, batch {args.batch}, lengths {args.lengths}, {amp or 'fp32'}, "
          f"threads {torch.get_num_threads()}")
    for name in arms:
        print(f"{name:>9}: first step of each length {first[name]:7.1f} s in all; timed steps median "
              f"{statistics.median(times[name]):.3f} s [{', '.join(f'{t:.2f}' for t in times[name])}]")
    print(f"compiled / eager: x{statistics.median(times['compiled']) / statistics.median(times['eager']):.3f}")
    for name in arms:
        print(f"{name:>9} losses: {' '.join(f'{x:.4f}' for x in losses[name])}")
    gaps = [abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])]
    print(f"largest loss difference between the arms: {max(gaps):.4f}")


if __name__ == "__main__":
    main()
