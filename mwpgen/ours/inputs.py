"""What the generator of ours reads, built one way for training, validation, generation and serving alike: a
problem's equation, its context slot and its text.

    [equation: E context:] [context slot: `width` token embeddings] [ problem:] [ problem tokens] [EOS]

The loss is on the last two parts. The slot always holds exactly `width` embeddings (train.ours.context_tokens):
first the context words' token embeddings, then zero vectors.
- context = selector, training: every candidate word of the problem, gated by its c
  (selector.py, step 4). The selected words come first, in a fresh order per example, and the
  unselected ones follow as zero vectors. They stay in the sequence because the straight-through gradient of
  their c comes from there.
- Inference: the words with q > threshold (or a user's keywords, mwpgen/generate/service.py), then zero vectors.
- tfidf / noun keywords: the given keywords' tokens (the caller applies keyword dropout), then zero vectors.
So what a model reads at test time is what it read in training, and it reveals nothing of the reference problem
but the selected words. The slot's width is fixed for that reason: with one zero vector per unselected word, the
count of the reference's candidate words and their places would show (docs/method.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from mwpgen.data.keywords import keywords_per_epoch
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, IGNORE_INDEX, encode_prompt
from mwpgen.ours.selector import WordTokens, tokenize_words


@dataclass(frozen=True)
class JointExample:
    equation: str
    problem: str
    keywords: tuple[str, ...] = ()


def epoch_examples(records: Sequence[dict], keywords: dict[str, Sequence[str]] | None, p: float,
                   seed: int) -> Callable[[int, int], list[JointExample]]:
    """`(phase, epoch) -> examples`: heuristic keywords (Table 4's keyword rows) get fresh dropout + permutation
    per epoch, as the baselines do; the selector needs none (it chooses from the problem itself)."""
    keywords_of = keywords_per_epoch(records, keywords, p, seed) if keywords else None

    def for_epoch(phase: int, epoch: int) -> list[JointExample]:
        chosen = keywords_of(phase, epoch) if keywords_of else [()] * len(records)
        return [JointExample(r["equation"], r["text"], tuple(k)) for r, k in zip(records, chosen)]
    return for_epoch


@dataclass
class Encoded:
    prefix: list[int]  # "equation: E context:" (with the tokenizer's special tokens)
    suffix: list[int]  # " problem:"
    problem: WordTokens
    keywords: list[list[int]]  # each given keyword's tokens (" kw"), for a keyword context
    example: JointExample
    truncated: bool = False  # problem cut at max_problem_tokens: no EOS target (as prompts.py does)


def encode_joint(tokenizer, ex: JointExample, max_problem_tokens: int | None = None) -> Encoded:
    before, after = GENERATOR_TEMPLATE.split(" {context} ")
    kw = [list(tokenizer(" " + k, add_special_tokens=False)["input_ids"]) for k in ex.keywords]
    problem = tokenize_words(tokenizer, ex.problem)
    truncated = max_problem_tokens is not None and len(problem.ids) > max_problem_tokens
    if truncated:
        problem = tokenize_words(tokenizer, ex.problem, max_problem_tokens)
    return Encoded(prefix=encode_prompt(tokenizer, before.format(equation=ex.equation)),
                   suffix=list(tokenizer(" " + after, add_special_tokens=False)["input_ids"]),
                   problem=problem, keywords=kw, example=ex, truncated=truncated)


def slot_embeddings(emb: torch.nn.Embedding, enc: Encoded, width: int, c_row: torch.Tensor | None = None,
                    permute: bool = False) -> torch.Tensor:
    """The context slot [width, D]. c_row [T] (selector) gates the problem's candidate words: the selected ones
    (c > 0.5) first, in order of appearance or a fresh random order (`permute`, training), the rest after them;
    c_row=None: the given keywords, all kept. Cut at `width` tokens, then filled with zero vectors."""
    dev = emb.weight.device
    if c_row is None:
        words, gates = enc.keywords, None
    else:
        heads = enc.problem.heads
        gate_of = c_row[torch.tensor([start for start, _ in heads], dtype=torch.long, device=c_row.device)]
        order = torch.randperm(len(heads)).tolist() if permute else list(range(len(heads)))
        picked = gate_of.detach() > 0.5
        order = [j for j in order if picked[j]] + [j for j in order if not picked[j]]
        words = [enc.problem.ids[heads[j][0]:heads[j][1]] for j in order]
        gates = torch.cat([gate_of[j].expand(len(words[k])) for k, j in enumerate(order)]) if order else None
    ids = [t for w in words for t in w][:width]
    slot = emb(torch.tensor(ids, dtype=torch.long, device=dev))
    if gates is not None:
        slot = slot * gates[: len(ids), None].to(slot.dtype)
    return torch.cat([slot, slot.new_zeros(width - len(ids), slot.shape[1])])


def prompt_embeddings(emb: torch.nn.Embedding, enc: Encoded, width: int, c_row: torch.Tensor | None = None,
                      permute: bool = False) -> torch.Tensor:
    """[equation: E context:] [slot] [ problem:] as input embeddings [P, D]: what the generator reads first."""
    def ids(xs):
        return torch.tensor(xs, dtype=torch.long, device=emb.weight.device)
    return torch.cat([emb(ids(enc.prefix)), slot_embeddings(emb, enc, width, c_row, permute), emb(ids(enc.suffix))])


def drop_words(c: torch.Tensor, p: float) -> torch.Tensor:
    """Keyword dropout on selected contexts (supplementary "Training Details", every model): each word's c is
    zeroed with probability p. c [B, T] is read at word heads only, so one draw per token is one per word."""
    if p <= 0:
        return c
    return c * torch.bernoulli(torch.full_like(c.detach(), 1.0 - p))


def generator_inputs(generator, tokenizer, batch: Sequence[Encoded], width: int, c: torch.Tensor | None = None,
                     permute: bool = False) -> dict:
    """Right-padded inputs_embeds [B, L, D], attention_mask, labels and each problem's start position.
    c [B, T] (selector) gates the candidate-word slot; c=None uses the given keywords instead."""
    emb = generator.get_input_embeddings()
    dev = emb.weight.device
    ids = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)  # noqa: E731 — a one-line local helper
    rows, labels, starts = [], [], []
    for i, b in enumerate(batch):
        prompt = prompt_embeddings(emb, b, width, None if c is None else c[i], permute)
        target = b.problem.ids + ([] if b.truncated else [tokenizer.eos_token_id])
        rows.append(torch.cat([prompt, emb(ids(target))]))
        starts.append(prompt.shape[0])
        labels.append([IGNORE_INDEX] * starts[-1] + target)
    embeds, mask = pad_rows(rows)
    lab = torch.full(mask.shape, IGNORE_INDEX, dtype=torch.long, device=dev)
    for i, r in enumerate(rows):
        lab[i, : r.shape[0]] = ids(labels[i])
    return {"inputs_embeds": embeds, "attention_mask": mask, "labels": lab, "starts": starts}


def pad_rows(rows: Sequence[torch.Tensor], left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack [T_i, D] embedding rows into [B, T, D] with zero padding on the right (training) or the left
    (generation: every row's next token in the last column), and the [B, T] attention mask."""
    width = max(r.shape[0] for r in rows)
    embeds = rows[0].new_zeros(len(rows), width, rows[0].shape[1])
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=embeds.device)
    for i, r in enumerate(rows):
        span = slice(width - r.shape[0], width) if left else slice(0, r.shape[0])
        embeds[i, span], mask[i, span] = r, 1
    return embeds, mask
