"""Batched decoding with the KV cache: MWPs from the generator p_Theta(M | E, c) and equations from
mwp2eq p_Phi(E | M) (the latter for the ACC-eq metric).

Prompts are encoded exactly as in training (prompts.encode_prompt), sorted by length so each batch
carries little padding, left-padded (so every row's next token sits in the last column and
`generate` derives position ids from the attention mask), and returned in the caller's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from mwpgen.lm.prompts import encode_prompt, mwp2eq_prompt

Decoding = Literal["greedy", "beam", "top_p"]


def _left_pad(rows: Sequence[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r)
        mask[i, width - len(r) :] = 1
    return ids, mask


def _generation_config(tokenizer, decoding: Decoding, num_beams: int, top_p: float, temperature: float,
                       max_new_tokens: int):
    from transformers import GenerationConfig

    # A fresh config: the checkpoint's generation_config (e.g. sampling defaults) must not leak in.
    common = dict(max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=tokenizer.eos_token_id, use_cache=True)
    if decoding == "greedy":
        return GenerationConfig(do_sample=False, num_beams=1, **common)
    if decoding == "beam":
        return GenerationConfig(do_sample=False, num_beams=num_beams, early_stopping=True, **common)
    if decoding == "top_p":
        return GenerationConfig(do_sample=True, top_p=top_p, top_k=0, temperature=temperature, **common)
    raise ValueError(f"unknown decoding {decoding!r}: expected greedy, beam or top_p")


@torch.no_grad()
def generate_texts(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    batch_size: int = 16,
    decoding: Decoding = "greedy",
    num_beams: int = 4,
    top_p: float = 0.9,
    temperature: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    device: str | torch.device | None = None,
) -> list[str]:
    """Continuation of each prompt (new tokens only), cut at EOS or the first newline, stripped: the problem for
    each generator prompt (prompts.generator_prompt), or mwp2eq's equation for each of its prompts."""
    if not prompts:
        return []
    device = torch.device(device) if device is not None else next(model.parameters()).device
    torch.manual_seed(seed)  # same seed + same prompts -> same samples
    config = _generation_config(tokenizer, decoding, num_beams, top_p, temperature, max_new_tokens)
    was_training = model.training
    model.eval()
    encoded = [encode_prompt(tokenizer, p) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]), reverse=True)
    out: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, mask = _left_pad([encoded[i] for i in idx], tokenizer.pad_token_id)
        seqs = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
        new_tokens = seqs[:, ids.shape[1] :]  # all rows share the padded prompt width
        for i, text in zip(idx, tokenizer.batch_decode(new_tokens, skip_special_tokens=True)):
            out[i] = text.split("\n", 1)[0].strip()
    model.train(was_training)
    return out


def predict_equations(
    mwp2eq_model,
    tokenizer,
    problems: Sequence[str],
    *,
    batch_size: int = 16,
    max_new_tokens: int = 48,
    device: str | torch.device | None = None,
) -> list[str]:
    """Greedy mwp2eq output (space-separated equation symbols, whitespace-normalised) per problem:
    compared with the input equation for ACC-eq."""
    texts = generate_texts(mwp2eq_model, tokenizer, [mwp2eq_prompt(p) for p in problems],
                           batch_size=batch_size, decoding="greedy", max_new_tokens=max_new_tokens,
                           device=device)
    return [" ".join(t.split()) for t in texts]

