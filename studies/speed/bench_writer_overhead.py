"""The writer of M' (ours' phase 2: `free_running_problems`, one decoding step per written token): how much of a
token is the host's dispatching of ops rather than arithmetic, side by side in one run.

    python -m studies.speed.bench_writer_overhead --model smollm2-135m --batch 8 --tokens 32
    python -m studies.speed.bench_writer_overhead --model MODEL --device cuda --batch 8 --tokens 64

Arms: the model itself, and the same architecture (its depth, head layout and vocabulary) at widths 64 / 128 / 8 (a
hidden size of 64, an MLP of 128, heads 8 wide), whose arithmetic is nearly nothing: its time per token is what the
host spends issuing the same ops (30 layers' projections, norms, attention, the cache, the Gumbel draw over the
vocabulary). Both write `--tokens` tokens for `--batch` rows (no EOS stops them), scoring pass included, bf16 autocast
as training has it; arms interleaved, median of `--rounds`.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from benchmarks.flops import timed
from benchmarks.machine import describe
from mwpgen.device import autocast_dtype
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.ours.consistency import free_running_problems


def narrow_copy(model):
    """The same architecture at hidden size 64, MLP 128 and heads 8 wide, randomly initialised (seed 0)."""
    from transformers import AutoModelForCausalLM

    config = model.config.__class__.from_dict(model.config.to_dict())
    config.hidden_size, config.intermediate_size, config.head_dim = 64, 128, 8  # the same heads, 8 wide
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(config).to(model.device)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32, help="tokens written per row")
    ap.add_argument("--prompt", type=int, default=40, help="prompt length of the shortest row (row i: + i)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    amp = autocast_dtype(device, mixed_precision=True)
    model, _tok = load_model_and_tokenizer(DEFAULT_MODEL if args.model == "smollm2-135m" else args.model,
                                           args.cache_dir, device=device)
    arms = {"model": model.train(), "narrow": narrow_copy(model).train()}
    generator = torch.Generator().manual_seed(0)
    prompt_ids = [torch.randint(0, 1000, (args.prompt + i,), generator=generator).to(device)
                  for i in range(args.batch)]
    prompts = {name: [m.get_input_embeddings()(ids).detach() for ids in prompt_ids] for name, m in arms.items()}

    def write(name: str, n: int) -> float:
        return timed(lambda: free_running_problems(arms[name], prompts[name], eos_id=-1, max_tokens=n, tau=1.0,
                                                   relaxation="gumbel", autocast_dtype=amp), device)

    for name in arms:
        write(name, 4)  # warm-up
    times = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name in arms:
            times[name].append(write(name, args.tokens) / args.tokens)
    print(f"machine: {describe()}" + (f"; GPU {torch.cuda.get_device_name()}" if device.type == "cuda" else ""))
    print(f"model {args.model}: {model.config.num_hidden_layers} layers, hidden {model.config.hidden_size}, vocab "
          f"{model.config.vocab_size}; batch {args.batch}, {args.tokens} tokens a row, {amp or 'fp32'}, "
          f"threads {torch.get_num_threads()}")
    per = {name: statistics.median(ts) for name, ts in times.items()}
    for name in arms:
        print(f"{name:>7}: {per[name] * 1e3:7.1f} ms a token [{', '.join(f'{t * 1e3:.1f}' for t in times[name])}]")
    print(f"the host's share (narrow / model): {per['narrow'] / per['model']:.0%}")


if __name__ == "__main__":
    main()
