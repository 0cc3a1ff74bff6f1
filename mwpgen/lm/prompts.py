"""Formatting (equation, context, problem) records as causal-LM examples.

The only place the prompt templates live. One example = prompt + " " + target + EOS, with the
loss (labels != -100) on target and EOS tokens only:

  generator p_Theta(M | E, c)  (paper Eq. 2-3, the "GPT" / "GPT-pre" baselines):
      equation: x = ( num1 - num2 ) context: candies jar problem: <problem text><EOS>
  mwp2eq    p_Phi(E | M)       (mwp2eq, Eq. 4, used for ACC-eq):
      problem: <problem text> equation: x = ( num1 - num2 )<EOS>

Prompt and target are tokenised separately (prompt with the tokenizer's own special tokens, e.g. a
BOS; target with a leading space and none), and generation encodes prompts with `encode_prompt`, so
training and generation see the same token boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from mwpgen.data.keywords import KEYWORD_DROPOUT, keywords_per_epoch

GENERATOR_TEMPLATE = "equation: {equation} context: {context} problem:"
MWP2EQ_PREFIX, MWP2EQ_SUFFIX = "problem: ", " equation:"
MWP2EQ_TEMPLATE = MWP2EQ_PREFIX + "{problem}" + MWP2EQ_SUFFIX
IGNORE_INDEX = -100  # torch cross_entropy's ignore_index: no loss on prompt or padding


@dataclass(frozen=True)
class LMExample:
    prompt: str
    target: str
    kind: str = "generator"  # "generator" | "mwp2eq": decides what truncation may cut


def generator_prompt(equation: str, keywords: Sequence[str]) -> str:
    return GENERATOR_TEMPLATE.format(equation=equation, context=" ".join(keywords))


def mwp2eq_prompt(problem: str) -> str:
    return MWP2EQ_TEMPLATE.format(problem=problem)


def generator_example(equation: str, keywords: Sequence[str], problem: str) -> LMExample:
    return LMExample(generator_prompt(equation, keywords), problem)


def mwp2eq_example(problem: str, equation: str) -> LMExample:
    return LMExample(mwp2eq_prompt(problem), equation, kind="mwp2eq")


def generator_epochs(
    records: Sequence[Mapping[str, str]],
    keywords: Mapping[str, Sequence[str]],
    *,
    p: float = KEYWORD_DROPOUT,
    seed: int = 0,
) -> Callable[[int], list[LMExample]]:
    """Return `epoch -> examples` with fresh keyword dropout per epoch, reproducible from (seed, epoch)
    so a resumed run can rebuild any epoch. `records` are processed records (id, text, equation);
    `keywords[id]` are that problem's context keywords."""

    keywords_of = keywords_per_epoch(records, keywords, p, seed)

    def for_epoch(epoch: int) -> list[LMExample]:
        return [generator_example(r["equation"], kws, r["text"]) for r, kws in zip(records, keywords_of(epoch))]

    return for_epoch


def mwp2eq_examples(records: Sequence[Mapping[str, str]]) -> list[LMExample]:
    return [mwp2eq_example(r["text"], r["equation"]) for r in records]


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    return list(tokenizer(prompt)["input_ids"])


def _encode_target(tokenizer, target: str) -> list[int]:
    return list(tokenizer(" " + target, add_special_tokens=False)["input_ids"])


def encode_example(tokenizer, example: LMExample, max_length: int) -> dict[str, list[int]]:
    """Token ids and labels for one example; labels are IGNORE_INDEX on the prompt (Eq. 3 sums only
    over the problem tokens m_t, conditioned on E and c).

    Over max_length: a generator example keeps its whole prompt (the equation is never cut) and
    loses the tail of the problem (and then its EOS: a cut problem must not learn to end there);
    an mwp2eq example keeps its whole target equation and loses the tail of the problem in the prompt.
    """
    prompt, target = encode_prompt(tokenizer, example.prompt), _encode_target(tokenizer, example.target)
    target = target + [tokenizer.eos_token_id]
    if example.kind == "mwp2eq":  # drop trailing problem words (re-encoding, so boundaries match generation)
        words = example.prompt[len(MWP2EQ_PREFIX) : -len(MWP2EQ_SUFFIX)].split()
        while len(prompt) + len(target) > max_length and words:
            words = words[: -max(1, (len(prompt) + len(target) - max_length) // 2)]
            prompt = encode_prompt(tokenizer, mwp2eq_prompt(" ".join(words)))
    elif len(prompt) + len(target) > max_length:
        target = target[: max(0, max_length - len(prompt))]
    if not target or len(prompt) + len(target) > max_length:
        raise ValueError(f"max_length={max_length} too small for example with prompt {example.prompt!r}")
    return {"input_ids": prompt + target, "labels": [IGNORE_INDEX] * len(prompt) + target}


def collate(batch: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a training batch (causal attention never looks right, so right padding is safe for
    the loss; generation uses left padding instead)."""
    width = max(len(b["input_ids"]) for b in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, b in enumerate(batch):
        n = len(b["input_ids"])
        ids[i, :n] = torch.tensor(b["input_ids"])
        labels[i, :n] = torch.tensor(b["labels"])
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
