"""Causal-LM plumbing on a tiny random Llama (2 layers, hidden 32, word-level tokenizer): fast, offline."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest
import torch

from mwpgen.data.keywords import keyword_dropout
from mwpgen.lm import prompts as lm_prompts
from mwpgen.lm.decoding import generate_texts, predict_equations
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import IGNORE_INDEX, encode_example, generator_example, mwp2eq_example
from mwpgen.lm.training import lm_loss, train_causal_lm
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    {
        "id": "1",
        "text": "Joan found num1 seashells . She gave num2 away . How many are left ?",
        "equation": "x = ( num1 - num2 )",
    },
    {
        "id": "2",
        "text": "Tom has num1 boxes with num2 candies each . How many candies ?",
        "equation": "x = ( num1 * num2 )",
    },
    {"id": "3", "text": "A jar holds num1 marbles . Sam adds num2 . How many now ?", "equation": "x = ( num1 + num2 )"},
    {"id": "4", "text": "num1 dollars are shared by num2 kids . How much each ?", "equation": "x = ( num1 / num2 )"},
]
KEYWORDS = {"1": ["Joan", "seashells", "beach"], "2": ["Tom", "boxes", "candies", "store", "week"],
            "3": ["jar"], "4": ["dollars", "kids"]}
GEN = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in RECORDS]
PARSE = [mwp2eq_example(r["text"], r["equation"]) for r in RECORDS]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    corpus = [e.prompt + " " + e.target for e in GEN + PARSE]
    return tiny_model_dir(tmp_path_factory.mktemp("tiny") / "model", corpus)


@pytest.fixture(scope="module")
def trained(tiny_dir, tmp_path_factory):
    """The tiny model overfitted on the 4 generator + 4 mwp2eq examples (shared by several tests)."""
    model, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"), pretrained=True)
    ckpt = tmp_path_factory.mktemp("ckpt") / "final"
    logs: list[dict] = []
    result = train_causal_lm(model, tok, GEN + PARSE, epochs=40, batch_size=4, lr=1e-2, max_length=64, seed=0,
                             device="cpu", mixed_precision=True, checkpoint_dir=ckpt, log_every=20, max_steps=0,
                             grad_accum=1, eval_every=0, patience=0, save_every=10,
                             on_log=logs.append)
    return model, tok, ckpt, result, logs


def test_labels_mask_prompt_and_padding(tiny_dir):
    _, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"))
    enc = encode_example(tok, GEN[0], max_length=64)
    n_prompt = len(lm_prompts.encode_prompt(tok, GEN[0].prompt))
    assert enc["labels"][:n_prompt] == [IGNORE_INDEX] * n_prompt
    assert enc["labels"][n_prompt:] == enc["input_ids"][n_prompt:]
    assert enc["labels"][-1] == tok.eos_token_id
    assert tok.decode(enc["labels"][n_prompt:-1]) == GEN[0].target
    batch = lm_prompts.collate([enc, encode_example(tok, GEN[3], 64)], tok.pad_token_id)
    short = int(batch["attention_mask"][1].sum())
    assert (batch["labels"][1, short:] == IGNORE_INDEX).all()  # right padding carries no loss
    assert (batch["input_ids"][1, short:] == tok.pad_token_id).all()


def test_loss_counts_only_target_tokens():
    torch.manual_seed(0)
    logits = torch.randn(1, 6, 11)
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, 4, 7, 2]])
    logp = logits.log_softmax(-1)
    manual = -(logp[0, 2, 4] + logp[0, 3, 7] + logp[0, 4, 2]) / 3  # token t predicted at position t-1
    assert torch.allclose(lm_loss(logits, labels), manual)
    changed = logits.clone()
    changed[0, 5] += 100.0  # the last position predicts nothing
    changed[0, 0] += 100.0  # position 0 predicts a prompt token
    assert torch.allclose(lm_loss(changed, labels), manual)


def test_truncation_keeps_prompt_equation_and_mwp2eq_target(tiny_dir):
    _, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"))
    n_prompt = len(lm_prompts.encode_prompt(tok, GEN[1].prompt))
    enc = encode_example(tok, GEN[1], max_length=n_prompt + 3)
    assert enc["input_ids"][:n_prompt] == lm_prompts.encode_prompt(tok, GEN[1].prompt)
    assert len(enc["input_ids"]) == n_prompt + 3 and tok.eos_token_id not in enc["labels"]
    eq_ids = tok(" " + PARSE[1].target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    enc = encode_example(tok, PARSE[1], max_length=len(eq_ids) + 8)
    assert len(enc["input_ids"]) <= len(eq_ids) + 8
    assert enc["labels"][-len(eq_ids):] == eq_ids
    assert tok.decode(enc["input_ids"][: -len(eq_ids)]).endswith("equation :")
    with pytest.raises(ValueError):
        encode_example(tok, GEN[1], max_length=n_prompt)
    with pytest.raises(ValueError):  # prompt longer than max_length: never cut the equation
        encode_example(tok, GEN[1], max_length=n_prompt - 2)


def test_keyword_dropout_seeded_and_fresh_per_epoch():
    epochs = lm_prompts.generator_epochs(RECORDS * 5, KEYWORDS, seed=3)
    assert epochs(0) == epochs(0)
    assert epochs(0) != epochs(1)
    kept = [len(keyword_dropout(["a", "b", "c", "d", "e"], rng=random.Random(i))) for i in range(400)]
    assert 3.2 < sum(kept) / len(kept) < 3.8  # E = 5 * 0.7
    assert "equation: x = ( num1 - num2 ) context:" in epochs(0)[0].prompt


def test_tiny_model_overfits_and_regenerates_targets(trained):
    model, tok, _, result, logs = trained
    losses = [h["train_loss"] for h in result["history"]]
    assert losses[-1] < 0.1 * losses[0]
    assert [r["step"] for r in logs][:2] == [20, 40] and set(logs[0]) == {
        "step",
        "epoch",
        "train_loss",
        "lr",
        "step_s",
        "tokens_per_s",
        "examples_per_s",
    }
    out = generate_texts(model, tok, [e.prompt for e in GEN], batch_size=4, max_new_tokens=24)
    assert sum(o == e.target for o, e in zip(out, GEN)) >= 3
    eqs = predict_equations(model, tok, [r["text"] for r in RECORDS], max_new_tokens=12)
    assert sum(p == r["equation"] for p, r in zip(eqs, RECORDS)) >= 3


def test_batched_equals_sequential_greedy(trained):
    model, tok, *_ = trained
    prompts = [e.prompt for e in GEN] + [lm_prompts.generator_prompt("x = ( num2 - num1 )", ["jar", "Tom"])]
    batched = generate_texts(model, tok, prompts, batch_size=5, max_new_tokens=16)
    single = [generate_texts(model, tok, [p], batch_size=1, max_new_tokens=16)[0] for p in prompts]
    assert batched == single
    assert generate_texts(model, tok, prompts, batch_size=2, decoding="beam", num_beams=3, max_new_tokens=16)


def test_sampling_deterministic_for_seed(tiny_dir):
    model, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"))  # untrained: high-entropy samples
    prompts = [e.prompt for e in GEN]
    kw = dict(batch_size=2, decoding="top_p", top_p=0.95, temperature=1.0, max_new_tokens=12)
    a = generate_texts(model, tok, prompts, seed=7, **kw)
    assert a == generate_texts(model, tok, prompts, seed=7, **kw)
    assert a != generate_texts(model, tok, prompts, seed=8, **kw)


def test_checkpoint_is_safetensors_and_reloads_identically(trained):
    model, tok, ckpt, result, _ = trained
    assert (ckpt / "model.safetensors").is_file() and not list(ckpt.glob("*.bin"))
    assert not list(ckpt.parent.glob(".final.tmp-*"))  # atomic save left no temp dir
    reloaded, tok2 = load_model_and_tokenizer(str(ckpt), Path("unused"))
    ids = torch.tensor([lm_prompts.encode_prompt(tok, GEN[0].prompt)])
    assert tok2(GEN[0].prompt)["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
    assert result["checkpoint_dir"] == str(ckpt) and result["steps"] == len(result["history"])


def test_random_init_differs_from_pretrained_and_is_seeded(tiny_dir):
    pre, _ = load_model_and_tokenizer(str(tiny_dir), Path("unused"), pretrained=True)
    rand_a, _ = load_model_and_tokenizer(str(tiny_dir), Path("unused"), pretrained=False, seed=0)
    rand_b, _ = load_model_and_tokenizer(str(tiny_dir), Path("unused"), pretrained=False, seed=0)
    rand_c, _ = load_model_and_tokenizer(str(tiny_dir), Path("unused"), pretrained=False, seed=1)
    w = "model.layers.0.self_attn.q_proj.weight"
    sd = {name: m.state_dict()[w] for name, m in [("pre", pre), ("a", rand_a), ("b", rand_b), ("c", rand_c)]}
    assert not torch.equal(sd["pre"], sd["a"])
    assert torch.equal(sd["a"], sd["b"]) and not torch.equal(sd["a"], sd["c"])
    assert type(pre) is type(rand_a) and pre.config.num_hidden_layers == rand_a.config.num_hidden_layers


@pytest.mark.skipif(os.environ.get("MWPGEN_SLOW") != "1", reason="loads the 135M GGUF (~30 s); set MWPGEN_SLOW=1")
def test_converted_smollm2_matches_gguf_logits():
    from transformers import AutoModelForCausalLM

    from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, find_smollm2_gguf

    model, tok = load_model_and_tokenizer("smollm2-135m", DEFAULT_MODEL_CACHE)
    gguf = find_smollm2_gguf()
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    ids = torch.tensor([lm_prompts.encode_prompt(tok, GEN[0].prompt)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, src(ids).logits)


def test_truncated_weights_are_named_by_file(tiny_dir, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a copy cut short
    with pytest.raises(ValueError, match=rf"^{re.escape(str(weights))}: the model's weights cannot be read"):
        load_model_and_tokenizer(str(broken), Path("unused"))
