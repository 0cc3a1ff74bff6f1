"""Sampling under the rule's surface checks (mwpgen/generate/surface_constraint.py): each numN of the equation once,
no other number, a question at the end; on a vocabulary that splits `num1` in two tokens and one that does not."""

from __future__ import annotations

import math

import torch

from mwpgen.generate.surface_constraint import SurfaceConstraint

VOCAB = ["<eos>", " num", "1", "2", "3", " apples", " ?", " 5", "\n", " num1", " How", "12", " num3", "s"]


class Tokenizer:
    eos_token_id = 0

    def __len__(self):
        return len(VOCAB)

    def decode(self, ids):
        return "".join(VOCAB[i] for i in ids)


def allowed(equation: str, written: list[str]) -> set[str]:
    constraint = SurfaceConstraint(Tokenizer(), equation)
    ids = torch.tensor([[VOCAB.index(t) for t in written]], dtype=torch.long)
    scores = constraint(ids, torch.zeros(1, len(VOCAB)))
    return {VOCAB[i] for i in range(len(VOCAB)) if not math.isinf(scores[0, i].item())}


def test_after_num_only_an_index_still_to_write():
    assert allowed("x = num1 - num2", [" How", " num"]) == {"1", "2"}
    assert allowed("x = num1 - num2", [" num", "1", " apples", " num"]) == {"2"}
    assert allowed("x = num1 - num2", [" num1", " apples", " num"]) == {"2"}  # the whole token counts too


def test_no_other_number_and_no_end_before_every_index_and_a_question():
    start = allowed("x = num1 - num2", [])
    assert start == {" num", " apples", " ?", " How", " num1", "s"}  # no digit, no "5", no end, no num3, no "12"
    assert "s" not in allowed("x = num1 - num2", [" num", "1"]) and "s" in allowed("x = num1 - num2", [" How"])
    assert "s" not in allowed("x = num1 - num2", [" num1"])  # `num1s` is no num1 to a reader
    one = allowed("x = num1 - num2", [" num1", " apples"])
    assert " num1" not in one and " num" in one and "<eos>" not in one
    done = allowed("x = num1 - num2", [" num", "1", " num", "2", " How"])
    assert " num" not in done and "<eos>" not in done and "\n" not in done  # every index written, no question yet
    asked = allowed("x = num1 - num2", [" num", "1", " num", "2", " How", " ?"])
    assert {"<eos>", "\n"} <= asked and " num" not in asked


def test_an_equation_it_cannot_read_is_left_alone():
    scores = torch.zeros(1, len(VOCAB))
    ids = torch.tensor([[1]], dtype=torch.long)
    assert torch.equal(SurfaceConstraint(Tokenizer(), "x = num12 + num1")(ids, scores), scores)
    assert torch.equal(SurfaceConstraint(Tokenizer(), "x = 3 + 4")(ids, scores), scores)
    # num4 has neither a digit token after `num` nor a whole token here: the vocabulary cannot write it
    assert torch.equal(SurfaceConstraint(Tokenizer(), "x = num1 + num4")(ids, scores), scores)
