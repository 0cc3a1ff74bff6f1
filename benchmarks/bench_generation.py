"""Generation throughput: batched (left-padded, KV cache) vs one prompt at a time, side by side.

    python -m benchmarks.bench_generation            # SmolLM2-135M
    python -m benchmarks.bench_generation --model tiny
    ... --train-steps 3   # also time fine-tuning steps (batch x seq tokens, fp32 on CPU)

Same model, prompts and decoding for both arms; prints problems/s for each and the ratio, and how
many greedy outputs agree between the arms (left padding changes float rounding only).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import torch

from mwpgen.lm.decoding import generate_texts
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.prompts import LMExample, generator_prompt
from mwpgen.lm.training import train_causal_lm
from tests.helpers.tiny_model import tiny_model_dir

EQUATIONS = ["x = ( num1 - num2 )", "x = ( num1 * num2 )", "x = ( num1 + num2 ) / num3", "x = num1 / ( num2 - num3 )"]
WORDS = ["Joan", "seashells", "beach", "Tom", "boxes", "candies", "jar", "marbles", "dollars", "kids", "week", "store"]


def make_prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [generator_prompt(rng.choice(EQUATIONS), rng.sample(WORDS, rng.randint(1, 6))) for _ in range(n)]


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help="smollm2-135m, tiny, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--n", type=int, default=32, help="number of prompts")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--decoding", default="greedy", choices=["greedy", "beam", "top_p"])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--train-steps", type=int, default=0, help="also time this many training steps")
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--train-seq", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    prompts = make_prompts(args.n)
    tmp = tempfile.TemporaryDirectory()
    spec = str(tiny_model_dir(Path(tmp.name) / "tiny", prompts)) if args.model == "tiny" else args.model
    load_s, (model, tok) = timed(lambda: load_model_and_tokenizer(spec, args.cache_dir))
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"model {args.model}: {n_params / 1e6:.1f}M params, loaded in {load_s:.1f}s; threads {torch.get_num_threads()}"
    )
    kw = dict(decoding=args.decoding, max_new_tokens=args.max_new_tokens, seed=0)
    generate_texts(model, tok, prompts[:2], batch_size=2, **{**kw, "max_new_tokens": 4})  # warm-up

    t_batched, batched = timed(lambda: generate_texts(model, tok, prompts, batch_size=args.batch_size, **kw))
    t_single, single = timed(lambda: generate_texts(model, tok, prompts, batch_size=1, **kw))
    for name, t in [(f"batched (bs={args.batch_size})", t_batched), ("one at a time", t_single)]:
        print(f"{name:>18}: {args.n / t:7.2f} problems/s  {t / args.n:6.3f} s/problem  ({t:.1f}s total)")
    print(f"speed-up batched/one-at-a-time: {t_single / t_batched:.2f}x; "
          f"identical outputs: {sum(a == b for a, b in zip(batched, single))}/{args.n}")
    print(f"sample: {prompts[0]!r} -> {batched[0]!r}")

    if args.train_steps > 0:
        # Examples whose prompt+target is exactly train_seq tokens: the step time is for batch x seq.
        ids = tok(" ".join(["word"] * (2 * args.train_seq)), add_special_tokens=False)["input_ids"]
        body = tok.decode(ids[: args.train_seq])
        examples = [LMExample(prompt="problem:", target=body)] * (args.train_batch * (args.train_steps + 1))
        res = train_causal_lm(model, tok, examples, epochs=1, batch_size=args.train_batch, lr=5e-5,
                              max_length=args.train_seq, seed=0, device="cpu", mixed_precision=False,
                              log_every=1, max_steps=args.train_steps + 1, grad_accum=1, eval_every=0, patience=0,
                              save_every=10)
        times = [r["tokens_per_s"] for r in res["log"]][1:]  # first step includes allocator warm-up
        tokens = args.train_batch * args.train_seq
        per_step = [tokens / t for t in times]
        print(f"train step batch {args.train_batch} x seq {args.train_seq} fp32: "
              f"{sum(per_step) / len(per_step):.2f} s/step (steps: {', '.join(f'{s:.2f}' for s in per_step)})")


if __name__ == "__main__":
    main()
