"""Joint training steps of "ours" (phase 1: selector + generator; phase 2: generator + mwp2eq) on a tiny Llama."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import encode_example, generator_example, mwp2eq_example
from mwpgen.ours.inputs import JointExample, encode_joint, generator_inputs
from mwpgen.ours.joint_step import JointModels, joint_step, make_optimizers, phase2_losses
from mwpgen.ours.selector import ContextSelector
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    ("x = ( num1 - num2 )", "Joan found num1 shells on the beach . She gave num2 away . How many are left ?",
     ("Joan", "beach")),
    ("x = ( num1 * num2 )", "Tom has num1 boxes with num2 candies each . How many candies ?", ("boxes",)),
    ("x = ( num1 + num2 )", "A jar holds num1 marbles . Sam adds num2 marbles . How many now ?", ()),
]
EXAMPLES = [JointExample(e, p, k) for e, p, k in RECORDS]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    corpus = [generator_example(e, k, p).prompt + " " + p for e, p, k in RECORDS]
    corpus += [mwp2eq_example(p, e).prompt + " " + e for e, p, _ in RECORDS]
    return tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", corpus)


def fresh_models(path) -> JointModels:
    gen, tok = load_model_and_tokenizer(str(path), Path("unused"))
    mwp2eq, ptok = load_model_and_tokenizer(str(path), Path("unused"), seed=1)
    models = JointModels(gen, mwp2eq, tok, ContextSelector.from_model(gen))
    models.check(ptok)
    return models


def test_keyword_context_is_the_baseline_prompt_in_a_slot_of_its_width(tiny_path):
    """A slot exactly as wide as the keywords is the baselines' prompt; a wider one adds zero vectors after them."""
    m = fresh_models(tiny_path)
    emb = m.generator.get_input_embeddings()
    for e, p, k in RECORDS:
        enc = encode_joint(m.tokenizer, JointExample(e, p, k))
        width = sum(len(w) for w in enc.keywords)
        inp = generator_inputs(m.generator, m.tokenizer, [enc], width, c=None)
        ref = encode_example(m.tokenizer, generator_example(e, k, p), 128)
        n = len(ref["input_ids"])
        assert torch.equal(inp["inputs_embeds"][0, :n], emb(torch.tensor(ref["input_ids"])))
        assert inp["labels"][0, :n].tolist() == ref["labels"] and int(inp["attention_mask"][0].sum()) == n
        wider = generator_inputs(m.generator, m.tokenizer, [enc], width + 3, c=None)
        n_prefix = len(enc.prefix) + width
        assert torch.equal(wider["inputs_embeds"][0, :n_prefix], inp["inputs_embeds"][0, :n_prefix])
        assert not wider["inputs_embeds"][0, n_prefix : n_prefix + 3].any()
        assert wider["labels"][0].tolist()[n_prefix + 3:] == inp["labels"][0].tolist()[n_prefix:]
    cut = encode_joint(m.tokenizer, EXAMPLES[0], max_problem_tokens=5)  # a cut problem must not learn to end
    labels = generator_inputs(m.generator, m.tokenizer, [cut], 8)["labels"][0]
    assert cut.truncated and labels[labels != -100].tolist() == cut.problem.ids and len(cut.problem.ids) == 5


def test_phase2_eq_gradient_reaches_generator_not_frozen_selector(tiny_path):
    m = fresh_models(tiny_path)
    torch.manual_seed(0)
    batch = [encode_joint(m.tokenizer, ex) for ex in EXAMPLES]
    losses = phase2_losses(m, batch, OursTrainParams(relaxation="gumbel", tau=0.5, free_run_tokens=8), dropout=0.3)
    assert set(losses) == {"loss", "lm", "eq", "mwp2eq", "written_tokens"}
    losses["eq"].backward(retain_graph=True)  # L_eq alone
    assert m.generator.model.layers[1].mlp.up_proj.weight.grad.abs().sum() > 0
    assert m.generator.get_input_embeddings().weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in m.selector.parameters())  # frozen selector: no gradient
    assert all(p.grad is None for p in m.mwp2eq.parameters())  # L_eq trains Theta, not Phi (default)
    losses["mwp2eq"].backward()  # mwp2eq learns from the real pairs
    assert all(p.grad is not None for p in m.mwp2eq.parameters())
    assert all(p.grad is None for p in m.selector.parameters())


def test_one_mwp2eq_pass_can_serve_l_eq_and_its_training(tiny_path):
    """mwp2eq_phase2 = generated: no pass on the real problems; L_eq trains Phi as well as Theta."""
    m = fresh_models(tiny_path)
    torch.manual_seed(0)
    batch = [encode_joint(m.tokenizer, ex) for ex in EXAMPLES]
    losses = phase2_losses(m, batch, OursTrainParams(mwp2eq_phase2="generated", free_run_tokens=8), dropout=0.0)
    assert set(losses) == {"loss", "lm", "eq", "written_tokens"}
    losses["eq"].backward()
    assert m.generator.get_input_embeddings().weight.grad.abs().sum() > 0
    assert all(p.grad is not None for p in m.mwp2eq.parameters())


def test_switches():
    with pytest.raises(ValueError, match="context"):
        OursTrainParams(context="keywords")


def _mean(xs):
    return sum(xs) / len(xs)


def test_joint_steps_reduce_the_loss(tiny_path):
    m = fresh_models(tiny_path)
    torch.manual_seed(0)
    opts = make_optimizers(m, lr=1e-2, selector_lr=1e-2)
    cfg = OursTrainParams(alpha=1.0, beta=0.5, rho=0.2, free_run_tokens=8)
    p1 = [joint_step(1, m, EXAMPLES, opts, cfg, 0.0) for _ in range(12)]
    assert {"loss", "lm", "kl", "selected_frac"} <= set(p1[0])
    assert _mean([r["loss"] for r in p1[-3:]]) < 0.8 * _mean([r["loss"] for r in p1[:3]])
    w = m.selector.proj.weight.detach().clone()
    p2 = [joint_step(2, m, EXAMPLES, opts, cfg, 0.0) for _ in range(12)]
    assert torch.equal(m.selector.proj.weight, w)  # phase 2 leaves the selector alone
    for key in ("loss", "lm", "eq", "mwp2eq"):
        assert _mean([r[key] for r in p2[-3:]]) < _mean([r[key] for r in p2[:3]]), key
    # Ablation switches run: softmax relaxation, no L_eq, given keywords without a selector.
    out = joint_step(2, m, EXAMPLES, opts, OursTrainParams(relaxation="softmax", free_run_tokens=8), 0.0)
    assert "eq" in out
    out = joint_step(2, m, EXAMPLES, opts, OursTrainParams(equation_text="teacher_forced"), 0.0)
    assert "eq" in out and "written_tokens" in out
    out = joint_step(2, m, EXAMPLES, opts, OursTrainParams(equation_loss=False), 0.0)
    assert "eq" not in out and out["loss"] == pytest.approx(out["lm"])
    no_sel = JointModels(m.generator, m.mwp2eq, m.tokenizer, selector=None)
    kw = OursTrainParams(context="noun")
    for phase in (1, 2):
        out = joint_step(phase, no_sel, EXAMPLES, make_optimizers(no_sel, lr=5e-5, selector_lr=0.0), kw, 0.3)
        assert "kl" not in out
