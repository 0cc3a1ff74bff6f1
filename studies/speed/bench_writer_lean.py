"""The writer of M' (ours' phase 2, `mwpgen.ours.consistency.free_running_problems`), today's loop against leaner
ones that write the same tokens, side by side in one run: what the host's per-token work costs and what removing it
buys, before any of it is adopted by the trainer.

    python -m studies.speed.bench_writer_lean --model smollm2-135m --batch 8 --tokens 32 --rounds 3

Arms (each writes `--tokens` tokens for `--batch` left-padded prompts, no EOS, bf16 autocast as training has it
unless said; the same Gumbel noise, drawn up front, so every arm can be checked token for token against today's):
- `today`: the library's loop (no_grad; the mask grown by a concatenation each step; the relaxation's softmax over
  the vocabulary taken, then its argmax). It is checked once against `free_running_problems` itself.
- `lean`: inference mode; the mask and positions preallocated; the Gumbel-max token as argmax(f + g), the softmax
  skipped (its argmax is the same).
- `lean_bf16`: `lean` on a bf16 copy of the weights made at each call (training changes them every step; the copy's
  cost is counted), without autocast: no cast of any activation or weight at any step. Its numerics differ from
  autocast's (norms and softmax in bf16): the share of tokens equal to today's is printed, not asserted.
- `static_compiled`: today's loop on transformers' StaticCache (per-layer buffers written in place, so every step
  has the same shapes) with the one-token step compiled by torch.compile (inductor writes C++ kernels on CPU); the
  prompt's pass stays eager. Its compile is timed apart (the warm-up call at the timed shapes); its bf16 kernels
  may round differently: tokens equal to today's are printed, not asserted.

Prints ms a token per arm (median of `--rounds`, interleaved), each against `today`, token agreement and the
first call's seconds (the warm-up, at the timed shapes).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import torch

from benchmarks.flops import timed
from benchmarks.machine import describe
from mwpgen.device import autocast_dtype
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.ours.consistency import free_running_problems, gumbel_noise
from mwpgen.ours.inputs import pad_rows


def write_today(model, prompts, noise, amp):
    """Today's loop of free_running_problems (its no-feedback path), tokens only, the noise given."""
    emb = model.get_input_embeddings()
    x, mask = pad_rows(prompts, left=True)
    position = (mask.cumsum(-1) - 1).clamp(min=0)
    cache, tokens = None, []
    with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None), torch.no_grad():
        for t in range(noise.shape[1]):
            out = model(inputs_embeds=x, attention_mask=mask, position_ids=position, cache=cache, use_cache=True,
                        logits_to_keep=1)
            cache = out.cache
            soft = torch.softmax(out.logits[:, -1].float() + noise[:, t], dim=-1)  # relax(), its noise given
            token = soft.argmax(-1)
            tokens.append(token)
            x = emb(token)[:, None]
            mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], dim=1)
            position = position[:, -1:] + 1
    return torch.stack(tokens, 1)


def write_lean(model, prompts, noise, amp):
    """The same tokens with less host work a step: inference mode, preallocated mask, argmax(f + g)."""
    emb = model.get_input_embeddings()
    x, prompt_mask = pad_rows(prompts, left=True)
    n, width = noise.shape[1], prompt_mask.shape[1]
    mask = torch.cat([prompt_mask, prompt_mask.new_ones(len(prompts), n)], dim=1)
    position = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    last = position[:, -1:]
    cache, tokens = None, []
    with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None), torch.inference_mode():
        for t in range(n):
            out = model(inputs_embeds=x, attention_mask=mask[:, :width + t], position_ids=position, cache=cache,
                        use_cache=True, logits_to_keep=1)
            cache = out.cache
            token = (out.logits[:, -1].float() + noise[:, t]).argmax(-1)
            tokens.append(token)
            x = emb(token)[:, None]
            position = last + t + 1
    return torch.stack(tokens, 1)


def write_lean_bf16(model, prompts, noise, amp):
    """`lean` on a bf16 copy of the weights, made here as a training step would have to."""
    copy16 = copy.deepcopy(model).to(torch.bfloat16)
    return write_lean(copy16, [p.to(torch.bfloat16) for p in prompts], noise, None)


COMPILED_STEPS: dict[int, torch.nn.Module] = {}  # one compiled step per model, reused across calls as training would


def write_static_compiled(model, prompts, noise, amp):
    """Today's loop on a static key-value cache (transformers' StaticCache: one buffer per layer, written in place)
    with the one-token step compiled (torch.compile, inductor: C++ kernels on CPU); the prompt's pass stays eager.
    A new prompt width or token count is a new shape: the first call of each compiles (dynamic after a second)."""
    from transformers import StaticCache

    emb = model.get_input_embeddings()
    x, prompt_mask = pad_rows(prompts, left=True)
    n, width = noise.shape[1], prompt_mask.shape[1]
    mask = torch.cat([prompt_mask, prompt_mask.new_ones(len(prompts), n)], dim=1)  # the cache's whole length
    position = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    last = position[:, -1:]
    cache = StaticCache(config=model.config, max_cache_len=width + n)
    if id(model) not in COMPILED_STEPS:  # setdefault would wrap the model anew at every call
        COMPILED_STEPS[id(model)] = torch.compile(model, fullgraph=True)
    step = COMPILED_STEPS[id(model)]
    tokens = []
    with torch.autocast(x.device.type, dtype=amp, enabled=amp is not None), torch.no_grad():
        out = model(inputs_embeds=x, attention_mask=mask, position_ids=position, cache=cache, use_cache=True,
                    logits_to_keep=1)
        for t in range(n):
            token = torch.softmax(out.logits[:, -1].float() + noise[:, t], dim=-1).argmax(-1)
            tokens.append(token)
            if t + 1 < n:
                out = step(inputs_embeds=emb(token)[:, None], attention_mask=mask, position_ids=last + t + 1,
                           cache=cache, use_cache=True, logits_to_keep=1)
    return torch.stack(tokens, 1)


ARMS = {"today": write_today, "lean": write_lean, "lean_bf16": write_lean_bf16,
        "static_compiled": write_static_compiled}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", help="smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32, help="tokens written per row")
    ap.add_argument("--prompt", type=int, default=40, help="prompt length of the shortest row (row i: + i)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    ap.add_argument("--no-amp", action="store_true", help="fp32 throughout, as an AVX2-only CPU trains")
    args = ap.parse_args(argv)
    device = torch.device("cpu")
    amp = autocast_dtype(device, mixed_precision=not args.no_amp)  # as training decides: bf16 where the CPU has it
    model, _tok = load_model_and_tokenizer(DEFAULT_MODEL if args.model == "smollm2-135m" else args.model,
                                           args.cache_dir, device=device)
    model.train()  # as in training: the writer runs between optimizer steps
    generator = torch.Generator().manual_seed(0)
    prompts = [model.get_input_embeddings()(torch.randint(0, 1000, (args.prompt + i,), generator=generator)).detach()
               for i in range(args.batch)]
    vocab = model.get_output_embeddings().weight.shape[0]
    noise = gumbel_noise((args.batch, args.tokens, vocab), generator=generator)

    # today's replica against the library itself: the same global-RNG Gumbel draws, the same tokens
    torch.manual_seed(1)
    library = free_running_problems(model, prompts, eos_id=-1, max_tokens=4, tau=1.0, relaxation="gumbel",
                                    autocast_dtype=amp)
    torch.manual_seed(1)
    replica_noise = torch.stack([gumbel_noise((args.batch, vocab)) for _ in range(4)], 1)  # relax()'s draws
    replica = write_today(model, prompts, replica_noise, amp)
    same_as_library = torch.equal(torch.stack([r.argmax(-1) for r in library]), replica)

    started = {}
    for name in args.arms:  # warm-up at the timed shapes: a compiled arm compiles here, timed apart
        start = time.perf_counter()
        ARMS[name](model, prompts, noise, amp)
        started[name] = time.perf_counter() - start
    tokens = {}
    times = {name: [] for name in args.arms}
    for _ in range(args.rounds):
        for name in args.arms:
            result = {}

            def write(result=result, name=name):  # bound here, though timed() calls it within this iteration
                return result.setdefault("t", ARMS[name](model, prompts, noise, amp))

            times[name].append(timed(write, device) / args.tokens)
            tokens[name] = result["t"]
    print(f"machine: {describe()}")
    print(f"model {args.model}: batch {args.batch}, {args.tokens} tokens a row, autocast {amp or 'off (fp32)'}, "
          f"threads {torch.get_num_threads()}; today's replica writes the library's tokens: {same_as_library}")
    per = {name: statistics.median(ts) for name, ts in times.items()}
    base = per.get("today")
    for name in args.arms:
        agree = (tokens[name] == tokens["today"]).float().mean().item() if "today" in tokens else float("nan")
        ratio = f" x{per[name] / base:.3f} today's" if base else ""
        rounds = ", ".join(f"{t * 1e3:.1f}" for t in times[name])
        print(f"{name:>15}: {per[name] * 1e3:7.1f} ms a token{ratio} [{rounds}]; "
              f"tokens equal to today's: {agree:.1%}; first call {started[name]:.1f} s")


if __name__ == "__main__":
    main()
