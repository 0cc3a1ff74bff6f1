"""mwpgen/tuning.py: pairs and RFT examples from readings, and steps that move the generator the way each
objective says (a tiny random model, a few steps)."""

from __future__ import annotations

from pathlib import Path

import torch

from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import generator_example
from mwpgen import tuning
from mwpgen.ours.inputs import JointExample
from tests.tiny_model import tiny_model_dir

RIGHT = "Sam has num1 apples . He buys num2 more . How many apples does he have ?"
WRONG = "Sam has num1 apples . He eats num2 . How many apples are left ?"
READINGS = [
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": RIGHT, "label": 1},
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": WRONG, "label": 0},
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": WRONG + " ?", "label": 0},
    {"id": "2", "equation": "x = num1 - num2", "context": "Sam", "generated": WRONG, "label": 1},
    {"id": "3", "equation": "x = num1 * num2", "context": "boxes", "generated": RIGHT, "label": 0},
]


def _generator(tmp_path: Path):
    corpus = [generator_example(r["equation"], r["context"].split(), r["generated"]).prompt + " " + r["generated"]
              for r in READINGS]
    model, tokenizer = load_model_and_tokenizer(str(tiny_model_dir(tmp_path / "tiny", corpus)), Path("unused"))
    torch.manual_seed(0)
    return model, tokenizer


def test_pairs_join_a_right_and_a_wrong_candidate_of_one_problem_only():
    pairs = tuning.preference_pairs(READINGS, per_group=5, seed=1)
    assert len(pairs) == 2  # problem 1: one right x two wrong; problems 2 and 3 have one side only
    assert all(p.chosen.problem == RIGHT and p.chosen.keywords == ("Sam", "apples") for p in pairs)
    assert len(tuning.preference_pairs(READINGS, per_group=1, seed=1)) == 1


def test_rft_examples_are_the_right_candidates_and_the_mix():
    training = [JointExample("x = num1 + num2", f"problem {i}", ()) for i in range(10)]
    examples = tuning.rft_examples(READINGS, training, mix=2.0, seed=1)
    assert sorted(e.problem for e in examples if not e.problem.startswith("problem")) == sorted([RIGHT, WRONG])
    assert sum(e.problem.startswith("problem") for e in examples) == 4


def test_dpo_steps_raise_the_margin_of_the_right_candidate(tmp_path):
    model, tok = _generator(tmp_path)
    pairs = tuning.preference_pairs(READINGS, per_group=5, seed=1)
    reference = tuning.reference_logprobs(model, tok, pairs, width=4, max_problem_tokens=40)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = tuning.tune_step(model, tok, optimizer, method="dpo", batch=pairs, width=4, max_problem_tokens=40,
                             reference=reference)
    assert abs(first["margin"]) < 1e-4  # the policy starts as the reference
    for _ in range(5):
        last = tuning.tune_step(model, tok, optimizer, method="dpo", batch=pairs, width=4, max_problem_tokens=40,
                                reference=reference)
    assert last["margin"] > 0.1 and last["loss"] < first["loss"]


def test_rft_steps_lower_the_loss_of_the_right_candidates(tmp_path):
    model, tok = _generator(tmp_path)
    batch = tuning.rft_examples(READINGS, [], mix=0.0, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = [tuning.tune_step(model, tok, optimizer, method="rft", batch=batch, width=4,
                               max_problem_tokens=40)["loss"] for _ in range(6)]
    assert losses[-1] < losses[0]
