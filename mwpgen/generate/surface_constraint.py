"""What a reader checks before solving (mwpgen.judge.rule.surface_checks), asked at sampling time instead of after:
each numN of the equation once, no other number, and a question at the end.

A masked problem writes its numbers as `num` followed by the index's digits: two tokens in SmolLM2's vocabulary
(" num", "1"), one in a word-level one (" num1"). At each step of each row, given what the row has written:
- right after `num`: only the digit of an index of the equation not written yet;
- elsewhere: no token with a digit in it (no other number, no index glued on) but a whole `numN` of an index not
  written yet, no `num` once every index is written, and no end (EOS or a line break, where generation ends)
  before every index is written and the last token closes a question ("?").
Right after an index, no token glued to it (a letter or digit with no space before it: `num1s` is no `num1` to a
reader). It only removes tokens (their logits to -inf): what is left keeps its order and is sampled as before. A row
that never meets the end's conditions is cut at max_new_tokens as any other, so a cut row can still fail the checks.
An equation with an index of two digits (num10 and up), or one the vocabulary cannot write, is left unconstrained.
Whether it pays is measured, not assumed: studies/surface_constraint.
"""

from __future__ import annotations

import re

import torch
from transformers import LogitsProcessor

NUM_WORD = "num"


class _Vocabulary:
    """What the constraint needs to know of a tokenizer's vocabulary, read once per tokenizer (decoding all of
    SmolLM2's 49,152 tokens takes about a second)."""

    def __init__(self, tokenizer):
        vocab = {i: tokenizer.decode([i]) for i in range(len(tokenizer))}
        self.num_ids = {i for i, t in vocab.items() if t.strip() == NUM_WORD}
        self.digit_of = {i: t for i, t in vocab.items() if len(t) == 1 and t.isdigit()}  # "1" (no space before)
        whole = {i: re.fullmatch(r"num(\d+)", t.strip()) for i, t in vocab.items()}
        self.whole_of = {i: m.group(1) for i, m in whole.items() if m}  # " num1" as one token
        self.question_ids = {i for i, t in vocab.items() if t.rstrip().endswith("?")}
        self.numeric = torch.tensor([i for i, t in vocab.items() if any(c.isdigit() for c in t)], dtype=torch.long)
        ends = {i for i, t in vocab.items() if "\n" in t} | ({tokenizer.eos_token_id} - {None})
        self.glued = torch.tensor([i for i, t in vocab.items() if t[:1].isalnum()], dtype=torch.long)
        self.ends = torch.tensor(sorted(ends), dtype=torch.long)
        self.nums = torch.tensor(sorted(self.num_ids), dtype=torch.long)


_VOCABULARIES: dict[int, tuple[object, _Vocabulary]] = {}


def _vocabulary(tokenizer) -> _Vocabulary:
    held = _VOCABULARIES.get(id(tokenizer))
    if held is None or held[0] is not tokenizer:  # an id reused by another tokenizer is read afresh
        held = _VOCABULARIES[id(tokenizer)] = (tokenizer, _Vocabulary(tokenizer))
    return held[1]


class SurfaceConstraint(LogitsProcessor):
    def __init__(self, tokenizer, equation: str):
        indices = sorted(set(re.findall(r"\bnum(\d+)\b", equation)))
        self.needed = set(indices)
        self.vocab = v = _vocabulary(tokenizer)
        self.index_ids = {d: i for i, d in v.digit_of.items() if d in indices}
        # every index of one digit, and writable: as `num` + its digit, or as one whole token
        self.active = bool(indices) and all(
            len(d) == 1 and ((d in self.index_ids and v.num_ids) or d in set(v.whole_of.values())) for d in indices)

    def written(self, row: list[int]) -> list[str]:
        """The indices a row has written, in order (`num` followed by a digit, or a whole `numN` token)."""
        v = self.vocab
        split = [(k, v.digit_of[b]) for k, (a, b) in enumerate(zip(row, row[1:])) if a in v.num_ids and b in v.digit_of]
        whole = [(k, v.whole_of[t]) for k, t in enumerate(row) if t in v.whole_of]
        return [d for _, d in sorted(split + whole)]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if not self.active:
            return scores
        v, width = self.vocab, scores.shape[1]
        scores = scores.clone()
        for r, row in enumerate(input_ids.tolist()):
            left = self.needed - set(self.written(row))
            if row and row[-1] in v.num_ids:  # the index's digit: one not written yet
                keep = torch.tensor([self.index_ids[d] for d in sorted(left) if d in self.index_ids], dtype=torch.long)
                allowed = torch.full_like(scores[r], float("-inf"))
                allowed[keep] = scores[r, keep]
                scores[r] = allowed if len(keep) else scores[r]  # `num` is banned once nothing is left to write
                continue
            kept = {i: scores[r, i].item() for i, d in v.whole_of.items() if d in left and i < width}
            scores[r, v.numeric[v.numeric < width]] = float("-inf")
            for i, value in kept.items():  # a whole numN of an index still to write
                scores[r, i] = value
            if not left:
                scores[r, v.nums[v.nums < width]] = float("-inf")
            if len(row) >= 2 and row[-2] in v.num_ids and row[-1] in v.digit_of or row and row[-1] in \
                    v.whole_of:  # an index just written: nothing glued to it
                scores[r, v.glued[v.glued < width]] = float("-inf")
            if left or not row or row[-1] not in v.question_ids:
                scores[r, v.ends[v.ends < width]] = float("-inf")
        return scores
