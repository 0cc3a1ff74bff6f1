"""What the generator of ours reads, built one way for training, validation and generation alike: a problem's
equation, its context slot (the candidate words gated by the selector's c, or given keywords) and its text.

    [equation: E context:] [context slot] [ problem:] [ problem tokens] [EOS]   loss on the last two

context = selector: the slot holds every candidate word of the problem, gated by c
(selector.gated_context_embeddings); tfidf / noun keywords: the slot is the given keywords' tokens (the caller
applies keyword dropout, as prompts.generator_epochs does), i.e. the baselines' prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from mwpgen.data.keywords import keywords_per_epoch
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, IGNORE_INDEX, encode_prompt
from mwpgen.ours.selector import WordTokens, context_slot, gated_context_embeddings, tokenize_words


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
    keywords: list[int]  # " kw1 kw2 ..." for context_source="keywords"
    example: JointExample
    truncated: bool = False  # problem cut at max_problem_tokens: no EOS target (as prompts.py does)


def encode_joint(tokenizer, ex: JointExample, max_problem_tokens: int | None = None) -> Encoded:
    before, after = GENERATOR_TEMPLATE.split(" {context} ")
    kw = list(tokenizer(" " + " ".join(ex.keywords), add_special_tokens=False)["input_ids"]) if ex.keywords else []
    problem = tokenize_words(tokenizer, ex.problem)
    truncated = max_problem_tokens is not None and len(problem.ids) > max_problem_tokens
    if truncated:
        problem = tokenize_words(tokenizer, ex.problem, max_problem_tokens)
    return Encoded(prefix=encode_prompt(tokenizer, before.format(equation=ex.equation)),
                   suffix=list(tokenizer(" " + after, add_special_tokens=False)["input_ids"]),
                   problem=problem, keywords=kw, example=ex, truncated=truncated)


def generator_inputs(generator, tokenizer, batch: Sequence[Encoded], c: torch.Tensor | None = None,
                     permute: bool = False) -> dict:
    """Right-padded inputs_embeds [B, L, D], attention_mask, labels and each problem's start position.
    c [B, T] (selector) gates the candidate-word slot; c=None uses the given keywords instead."""
    emb = generator.get_input_embeddings()
    dev = emb.weight.device
    ids = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)  # noqa: E731
    rows, labels, starts = [], [], []
    for i, b in enumerate(batch):
        if c is None:
            slot = emb(ids(b.keywords))
        else:
            order = torch.randperm(len(b.problem.heads)).tolist() if permute else None
            slot = gated_context_embeddings(emb, *context_slot(b.problem, order), c[i])
        target = b.problem.ids + ([] if b.truncated else [tokenizer.eos_token_id])
        rows.append(torch.cat([emb(ids(b.prefix)), slot, emb(ids(b.suffix)), emb(ids(target))]))
        starts.append(len(b.prefix) + slot.shape[0] + len(b.suffix))
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
