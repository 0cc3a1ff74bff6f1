"""The generator's context slot (mwpgen/ours/inputs.py): fixed width, selected words first, unselected ones as zero
vectors that still pass the straight-through gradient; test-time inputs reveal only the selected words; serving
and the generate stage build exactly what training builds; keyword dropout zeroes whole words."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import generator_example, mwp2eq_example
from mwpgen.ours.inputs import JointExample, drop_words, encode_joint, prompt_embeddings, slot_embeddings
from tests.helpers.tiny_model import tiny_model_dir

# Both problems have "candies" among their candidate words; the first has five candidates, the second two.
RECORDS = [("x = num1 * num2", "Tom has num1 boxes with num2 candies each . Sam likes red balloons ."),
           ("x = num1 * num2", "Ann eats num1 candies , num2 each day .")]
WIDTH = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    corpus = [generator_example(e, [], p).prompt + " " + p for e, p in RECORDS]
    corpus += [mwp2eq_example(p, e).prompt + " " + e for e, p in RECORDS]
    path = tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", corpus)
    return load_model_and_tokenizer(str(path), Path("unused"))


def picks(enc, *words: str) -> torch.Tensor:
    """c over enc's problem tokens: 1 at the heads of `words`."""
    c = torch.zeros(len(enc.problem.ids))
    for start, _ in enc.problem.heads:
        if enc.problem.words[enc.problem.word_of[start]] in words:
            c[start] = 1.0
    return c


def test_slot_is_fixed_width_selected_words_then_zeros(tiny):
    model, tok = tiny
    emb = model.get_input_embeddings()
    enc = encode_joint(tok, JointExample(*RECORDS[0]))
    slot = slot_embeddings(emb, enc, WIDTH, picks(enc, "candies", "balloons"))
    ids = [t for w in ("candies", "balloons") for t in tok(" " + w, add_special_tokens=False)["input_ids"]]
    assert slot.shape == (WIDTH, emb.weight.shape[1])
    assert torch.equal(slot[: len(ids)], emb(torch.tensor(ids)))
    assert not slot[len(ids):].any()
    # Cut at the width: never longer, whatever the words.
    assert slot_embeddings(emb, enc, 2, torch.ones(len(enc.problem.ids))).shape[0] == 2


def test_test_time_slot_reveals_only_the_selected_words(tiny):
    """Two references with different candidate words (5 against 2) and the same pick give the same prompt, and it is
    the prompt a user's keyword gives (mwpgen/generate/service.py builds it from JointExample(equation, "",
    keywords))."""
    model, tok = tiny
    emb = model.get_input_embeddings()
    a, b = (encode_joint(tok, JointExample(*r)) for r in RECORDS)
    assert len(a.problem.heads) != len(b.problem.heads)
    from_a = prompt_embeddings(emb, a, WIDTH, picks(a, "candies"))
    from_b = prompt_embeddings(emb, b, WIDTH, picks(b, "candies"))
    served = prompt_embeddings(emb, encode_joint(tok, JointExample(RECORDS[0][0], "", ("candies",))), WIDTH)
    assert torch.equal(from_a, from_b) and torch.equal(from_a, served)


def test_unselected_words_pass_the_straight_through_gradient(tiny):
    """Forward they are zero vectors; backward every candidate's c gets <dL/de, its embedding>."""
    model, tok = tiny
    emb = model.get_input_embeddings()
    enc = encode_joint(tok, JointExample(*RECORDS[0]))
    hard = picks(enc, "candies")
    q = torch.full_like(hard, 0.3, requires_grad=True)
    c = hard + (q - q.detach())  # the straight-through sample of selector.sample_straight_through
    slot = slot_embeddings(emb, enc, WIDTH, c)
    weights = torch.randn_like(slot)
    (slot * weights).sum().backward()
    heads = [start for start, _ in enc.problem.heads]
    assert all(q.grad[h] != 0 for h in heads)
    assert all(q.grad[t] == 0 for t in range(len(q)) if t not in heads)


def test_permuted_training_order_keeps_selected_words_first(tiny):
    model, tok = tiny
    emb = model.get_input_embeddings()
    enc = encode_joint(tok, JointExample(*RECORDS[0]))
    c = picks(enc, "Tom", "balloons")
    torch.manual_seed(0)
    slots = {tuple(slot_embeddings(emb, enc, WIDTH, c, permute=True)[:, 0].tolist()) for _ in range(20)}
    assert len(slots) == 2  # the two selected words in either order, the zeros after them
    for slot in slots:
        n = sum(len(tok(" " + w, add_special_tokens=False)["input_ids"]) for w in ("Tom", "balloons"))
        assert all(v != 0 for v in slot[:n]) and all(v == 0 for v in slot[n:])


def test_keyword_dropout_zeroes_whole_words_at_its_rate():
    torch.manual_seed(0)
    c = torch.ones(4000, 3)
    kept = drop_words(c, 0.3)
    assert set(kept.unique().tolist()) == {0.0, 1.0}
    assert abs(float(kept.mean()) - 0.7) < 0.02
    assert torch.equal(drop_words(c, 0.0), c)
