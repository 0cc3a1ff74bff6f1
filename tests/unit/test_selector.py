"""Context selector q_Psi (Eq. 5), straight-through sampling and L_c on a tiny random Llama."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
import torch

from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import encode_example, generator_example, mwp2eq_example
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.ours.joint_step import JointModels, phase1_losses
from mwpgen.ours.selector import (
    ContextSelector,
    bernoulli_kl,
    fit_to_keywords,
    sample_straight_through,
    selected_words,
    selector_batch,
    tokenize_words,
)
from tests.helpers.tiny_model import tiny_model_dir

# "sea-shells" is ONE whitespace word but three tokens (sea, -, shells) for the tiny tokenizer.
RECORDS = [("x = ( num1 - num2 )", "Joan found num1 sea-shells on the beach . Joan gave num2 away . How many ?"),
           ("x = ( num1 * num2 )", "Tom has num1 boxes with num2 candies each . How many candies ?")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    corpus = [generator_example(e, [], p).prompt + " " + p for e, p in RECORDS]
    corpus += [mwp2eq_example(p, e).prompt + " " + e for e, p in RECORDS]
    path = tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", corpus)
    return load_model_and_tokenizer(str(path), Path("unused"))


def test_bernoulli_kl_matches_closed_form():
    q = torch.tensor([[0.2, 0.7, 0.9], [0.1, 0.5, 0.0]])
    cand = torch.tensor([[True, True, False], [True, True, False]])
    kl = bernoulli_kl(q, 0.1, cand)
    # By hand: KL(Bern(q) || Bern(rho)) = q ln(q/rho) + (1-q) ln((1-q)/(1-rho)), summed over candidates.
    row0 = (0.2 * math.log(2.0) + 0.8 * math.log(0.8 / 0.9)) + (0.7 * math.log(7.0) + 0.3 * math.log(0.3 / 0.9))
    row1 = 0.0 + (0.5 * math.log(5.0) + 0.5 * math.log(0.5 / 0.9))  # q = rho contributes exactly 0
    assert kl.tolist() == pytest.approx([row0, row1], rel=1e-5)
    with pytest.raises(ValueError, match="rho"):
        bernoulli_kl(q, 0.0, cand)


def test_tokenize_words_maps_subwords_and_masks_candidates(tiny):
    _, tok = tiny
    eq, text = RECORDS[0]
    wt = tokenize_words(tok, text)
    full = encode_example(tok, generator_example(eq, [], text), 128)["input_ids"]
    assert full[-len(wt.ids) - 1 : -1] == wt.ids  # the generator's target tokens, EOS aside
    words = [wt.words[wt.word_of[s]] for s, _ in wt.heads]
    # No stopwords ("on", "the"), punctuation, num tokens; "Joan" once (first occurrence only).
    assert words == ["Joan", "found", "sea-shells", "beach", "gave", "away"]
    s, e = wt.heads[2]
    assert e - s == 3 and [tok.convert_ids_to_tokens(i) for i in wt.ids[s:e]] == ["sea", "-", "shells"]
    cand = wt.candidate
    assert sum(cand) == 6 and cand[s] and not cand[s + 1]  # only the head sub-token is a candidate


def test_selected_words_threshold_on_head_token(tiny):
    _, tok = tiny
    wt = tokenize_words(tok, RECORDS[0][1])
    q = [0.0] * len(wt.ids)
    s, e = wt.heads[2]
    q[s] = 0.9  # head of "sea-shells"
    q[wt.heads[0][0]] = 0.5  # "Joan": not > 0.5
    q[e - 1] = 0.99  # a non-head sub-token never decides
    q[wt.heads[3][0]] = 0.51
    assert selected_words(wt, q) == ["sea-shells", "beach"]
    assert selected_words(wt, torch.tensor(q)) == ["sea-shells", "beach"]


def test_selector_frozen_embeddings_and_mask(tiny):
    model, tok = tiny
    sel = ContextSelector.from_model(model)
    assert [n for n, _ in sel.named_parameters()] == ["proj.weight", "proj.bias"]  # Psi = {w, b}
    before = sel.embeddings.clone()
    with torch.no_grad():
        model.get_input_embeddings().weight.add_(1.0)  # the generator's embeddings move on...
    assert torch.equal(sel.embeddings, before)  # ...the selector's pre-trained copy does not
    with torch.no_grad():
        model.get_input_embeddings().weight.sub_(1.0)
    items = [tokenize_words(tok, t) for _, t in RECORDS]
    batch = selector_batch(items, tok.pad_token_id)
    q = sel(**batch)
    assert q.shape == batch["ids"].shape
    assert (q[~batch["candidate"]] == 0).all() and ((q[batch["candidate"]] > 0) & (q[batch["candidate"]] < 1)).all()


def test_straight_through_forward_hard_backward_identity():
    torch.manual_seed(0)
    q = torch.rand(4, 6, requires_grad=True)
    c = sample_straight_through(q)
    assert set(c.detach().unique().tolist()) <= {0.0, 1.0}
    weights = torch.randn(4, 6)
    (c * weights).sum().backward()
    assert torch.equal(q.grad, weights)  # dc/dq = 1


def test_straight_through_gives_psi_gradient_from_lm(tiny):
    model, tok = tiny
    torch.manual_seed(0)
    sel = ContextSelector.from_model(model)
    models = JointModels(model, model, tok, sel)  # the mwp2eq is unused in phase 1
    batch = [encode_joint(tok, JointExample(e, p)) for e, p in RECORDS]
    losses = phase1_losses(models, batch, OursTrainParams(context_loss=False), dropout=0.0)
    assert set(losses) >= {"loss", "lm", "kl"}
    losses["lm"].backward()  # L_LM alone: its only route to Psi is the straight-through estimator
    assert sel.proj.weight.grad is not None and sel.proj.weight.grad.abs().sum() > 0
    assert sel.proj.bias.grad is not None and sel.proj.bias.grad.abs().item() > 0
    model.zero_grad(set_to_none=True)


def test_residual_selector_starts_at_the_prior_and_learns_word_level_scores(tiny):
    from mwpgen.ours.selection_stats import selection_stats

    model, tok = tiny
    sel = ContextSelector.from_model(model, "residual", prior=0.2)
    items = [tokenize_words(tok, p) for _, p in RECORDS]
    batch = selector_batch(items, tok.pad_token_id)
    q = sel(**batch)
    assert torch.allclose(q[batch["candidate"]], torch.full_like(q[batch["candidate"]], 0.2))  # every pick learned
    assert (q[~batch["candidate"]] == 0).all()
    # One gradient step that rewards one word raises that word's q and not every word of the problem alike:
    # the residual form sees each word's own embedding (Eq. 5's m~_t is nearly the same for all of them).
    target = items[0].heads[0][0]
    (-torch.log(sel(**batch)[0, target])).backward()
    with torch.no_grad():
        sel.proj.weight -= 5.0 * sel.proj.weight.grad
    q2 = sel(**batch)[0][batch["candidate"][0]].detach()
    assert q2[0] > 0.2 and float(q2.max() - q2.min()) > 1e-3
    models = JointModels(model, None, tok, sel)
    low = selection_stats(models, [JointExample(e, p) for e, p in RECORDS], 0.01, None)  # every candidate clears it
    assert low["picks"] == [[it.words[it.word_of[a]] for a, _ in it.heads] for it in items]
    assert low["none_share"] == 0 and low["words_median"] == statistics.median(len(it.heads) for it in items)
    high = selection_stats(models, [JointExample(e, p) for e, p in RECORDS], 0.99, None)
    assert high["none_share"] == 1.0 and high["q_max"] < 0.99


def test_unknown_selector_form_is_refused(tiny):
    with pytest.raises(ValueError, match="selector form"):
        ContextSelector.from_model(tiny[0], "attention")


def test_fit_to_keywords_makes_q_pick_the_keywords(tiny):
    """selector_init = keywords: from the prior (no word above 0.5), the fit makes q > 0.5 pick each problem's
    keywords and nothing else."""
    model, tok = tiny
    sel = ContextSelector.from_model(model, "residual", prior=0.3)
    items = [tokenize_words(tok, p) for _, p in RECORDS]
    keywords = [["sea-shells", "beach"], ["candies"]]
    batch = selector_batch(items, 0)
    assert not (sel(**batch) > 0.5).any()
    stats = fit_to_keywords(sel, items, keywords, steps=300, lr=0.1)
    assert stats["agreement"] == 1.0 and stats["candidates"] == sum(len(it.heads) for it in items)
    q = sel(**batch)
    assert [selected_words(it, q[i, : len(it.ids)]) for i, it in enumerate(items)] == keywords


def test_a_truncated_selector_file_is_named(tmp_path):
    from safetensors.torch import save_file

    from mwpgen.ours.bundle import load_selector

    good = tmp_path / "selector.safetensors"
    selector = ContextSelector(torch.randn(10, 4))
    save_file({k: v.contiguous() for k, v in selector.state_dict().items()}, str(good))
    assert torch.equal(load_selector(good, selector.form).embeddings, selector.embeddings)
    cut = tmp_path / "cut" / "selector.safetensors"
    cut.parent.mkdir()
    cut.write_bytes(good.read_bytes()[:20])
    with pytest.raises(ValueError, match=r"cut/selector.safetensors: the selector's weights cannot be read"):
        load_selector(cut, selector.form)
