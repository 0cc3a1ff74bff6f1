"""Equation consistency L_eq (Eq. 4) with the Gumbel-softmax relaxation, on tiny random Llamas."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import collate, encode_example, generator_example, mwp2eq_example
from mwpgen.lm.training import lm_loss
from mwpgen.ours.consistency import (
    check_shared_vocabulary,
    equation_consistency_loss,
    free_running_problems,
    mwp2eq_pieces,
    relax,
    soft_mwp2eq_nll,
    teacher_forced_problems,
)
from mwpgen.ours.inputs import JointExample, encode_joint, prompt_embeddings
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [("x = ( num1 - num2 )", "Joan found num1 shells . She gave num2 away . How many are left ?"),
           ("x = ( num1 * num2 )", "Tom has num1 boxes with num2 candies each . How many candies ?")]
CORPUS = [generator_example(e, [], p).prompt + " " + p for e, p in RECORDS]
CORPUS += [mwp2eq_example(p, e).prompt + " " + e for e, p in RECORDS]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", CORPUS)
    gen, tok = load_model_and_tokenizer(str(path), Path("unused"))
    mwp2eq, _ = load_model_and_tokenizer(str(path), Path("unused"))
    return gen, mwp2eq, tok, path


def test_relaxation_is_a_distribution_and_approaches_one_hot():
    f = torch.randn(5, 40, generator=torch.Generator().manual_seed(0)) * 2
    noise_seed = 123
    gaps = []
    for tau in [2.0, 1.0, 0.1, 0.01, 0.001]:
        m = relax(f, tau, "gumbel", generator=torch.Generator().manual_seed(noise_seed))
        assert torch.allclose(m.sum(-1), torch.ones(5)) and (m >= 0).all()
        hard = F.one_hot(m.argmax(-1), 40).float()
        gaps.append((m - hard).abs().sum().item())
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-3  # tau -> 0: one-hot of argmax(f + g)
    # The same noise seed gives the same argmax at every tau: argmax(f + g) does not depend on tau.
    u = torch.rand(5, 40, generator=torch.Generator().manual_seed(noise_seed)).clamp(1e-10, 1 - 1e-10)
    g = -torch.log(-torch.log(u))
    assert torch.equal(m.argmax(-1), (f + g).argmax(-1))
    soft = relax(f, 0.001, "softmax")  # deterministic ablation: one-hot of argmax(f)
    assert torch.allclose(soft, F.one_hot(f.argmax(-1), 40).float(), atol=1e-3)
    with pytest.raises(ValueError, match="relaxation"):
        relax(f, 1.0, "argmax")
    with pytest.raises(ValueError, match="tau"):
        relax(f, 0.0)


def test_one_hot_problem_reproduces_mwp2eq_nll(tiny):
    """Hard one-hot rows of the real problem tokens give exactly mwp2eq's NLL on the real example: the
    soft prompt is prompts.py's mwp2eq template token for token."""
    _, mwp2eq, tok, _ = tiny
    soft, pieces = [], []
    for eq, text in RECORDS:
        ids = tok(" " + text, add_special_tokens=False)["input_ids"]
        soft.append(F.one_hot(torch.tensor(ids), mwp2eq.config.vocab_size).float())
        pieces.append(mwp2eq_pieces(tok, eq))
    nll_sum, n = soft_mwp2eq_nll(mwp2eq, soft, pieces)
    batch = collate([encode_example(tok, mwp2eq_example(p, e), 128) for e, p in RECORDS], tok.pad_token_id)
    with torch.no_grad():
        ref = lm_loss(mwp2eq(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits,
                      batch["labels"])
    assert n == int((batch["labels"] != -100).sum())
    assert (nll_sum / n).item() == pytest.approx(ref.item(), rel=1e-5)


def test_eq_loss_gradient_reaches_generator_only(tiny):
    gen, mwp2eq, tok, _ = tiny
    torch.manual_seed(0)
    eq, text = RECORDS[0]
    enc = encode_example(tok, generator_example(eq, [], text), 128)
    n_target = len(tok(" " + text, add_special_tokens=False)["input_ids"])
    start = len(enc["input_ids"]) - n_target - 1  # position of the first problem token (EOS last)
    logits = gen(input_ids=torch.tensor([enc["input_ids"]])).logits
    f = [logits[0, start - 1 : start - 1 + n_target]]
    for train_mwp2eq in (False, True):
        gen.zero_grad(set_to_none=True)
        mwp2eq.zero_grad(set_to_none=True)
        soft = teacher_forced_problems(f, 0.5, "gumbel")
        loss, n_eq = equation_consistency_loss(mwp2eq, tok, soft, [eq], train_mwp2eq=train_mwp2eq)
        loss.backward(retain_graph=True)
        assert n_eq == len(mwp2eq_pieces(tok, eq)[2])
        assert gen.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0  # Theta is reached
        mwp2eq_grads = [p.grad for p in mwp2eq.parameters()]
        if train_mwp2eq:
            assert any(g is not None and g.abs().sum() > 0 for g in mwp2eq_grads)
        else:
            assert all(g is None for g in mwp2eq_grads)  # Phi is not trained by L_eq by default
    assert all(p.requires_grad for p in mwp2eq.parameters())  # `frozen` restores the flags


def test_mismatched_vocabularies_are_refused(tiny, tmp_path):
    gen, mwp2eq, tok, _ = tiny
    check_shared_vocabulary(tok, tok, gen, mwp2eq)  # same vocabulary: fine
    other_path = tiny_model_dir(tmp_path / "other", CORPUS + ["zebra zebras"])
    other, other_tok = load_model_and_tokenizer(str(other_path), Path("unused"))
    with pytest.raises(ValueError) as err:
        check_shared_vocabulary(tok, other_tok, gen, other)
    msg = str(err.value)
    assert str(len(tok.get_vocab())) in msg and str(len(other_tok.get_vocab())) in msg
    assert "first differing token" in msg
    other.resize_token_embeddings(len(tok.get_vocab()) + 8)  # same tokenizer, different model rows
    with pytest.raises(ValueError, match="input embedding vocabulary size"):
        check_shared_vocabulary(tok, tok, gen, other)


def _prompts(gen, tok, width=6):
    emb = gen.get_input_embeddings()
    return [prompt_embeddings(emb, encode_joint(tok, JointExample(e, "", tuple(p.split()[:k]))), width)
            for (e, p), k in zip(RECORDS, (1, 3))]


def test_free_running_softmax_problem_is_the_greedy_decoding(tiny):
    """relaxation = softmax: the forward tokens of the written M' are exactly greedy decoding from each prompt,
    batched with left padding (position ids from the mask), up to the row's first EOS."""
    gen, _, tok, _ = tiny
    gen.eval()
    prompts = _prompts(gen, tok)
    with torch.no_grad():
        written = free_running_problems(gen, prompts, tok.eos_token_id, 10, tau=1.0, relaxation="softmax")
        for prompt, m in zip(prompts, written):
            out = gen.generate(
                inputs_embeds=prompt[None],
                attention_mask=torch.ones(1, prompt.shape[0], dtype=torch.long),
                do_sample=False,
                max_new_tokens=10,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )[0].tolist()
            greedy = out[: out.index(tok.eos_token_id)] if tok.eos_token_id in out else out
            assert m.argmax(-1).tolist() == greedy[: max(len(greedy), 1)] or (not greedy and m.shape[0] == 1)
            hard = torch.nn.functional.one_hot(m.argmax(-1), m.shape[-1]).float()
            assert torch.allclose(m, hard, atol=1e-6)  # the forward value is the token (up to rounding)


def test_free_running_l_eq_reaches_the_generator_through_every_written_token(tiny):
    """L_eq of a problem the generator wrote: the gradient reaches Theta (straight-through), not Phi."""
    gen, mwp2eq, tok, _ = tiny
    gen.train()
    torch.manual_seed(0)
    gen.zero_grad(set_to_none=True)
    mwp2eq.zero_grad(set_to_none=True)
    written = free_running_problems(gen, _prompts(gen, tok), tok.eos_token_id, 8, tau=1.0, relaxation="gumbel")
    assert all(1 <= m.shape[0] <= 8 for m in written)
    loss, _ = equation_consistency_loss(mwp2eq, tok, written, [e for e, _ in RECORDS])
    loss.backward()
    assert gen.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in mwp2eq.parameters())


def test_written_problem_is_the_same_with_or_without_the_feedback_gradient(tiny):
    """The graph-free writing then one scoring pass writes the tokens the all-in-the-graph writing writes (greedy),
    and both give the generator a gradient."""
    gen, mwp2eq, tok, _ = tiny
    gen.train()
    written = {}
    for feedback in (False, True):
        gen.zero_grad(set_to_none=True)
        m = free_running_problems(gen, _prompts(gen, tok), tok.eos_token_id, 8, tau=1.0, relaxation="softmax",
                                  feedback_gradient=feedback)
        written[feedback] = [x.argmax(-1).tolist() for x in m]
        loss, _ = equation_consistency_loss(mwp2eq, tok, m, [e for e, _ in RECORDS])
        loss.backward()
        assert gen.model.layers[0].self_attn.q_proj.weight.grad.abs().sum() > 0
    assert written[False] == written[True]
