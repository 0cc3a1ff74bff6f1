"""Seq2seq baselines on 5 tiny problems: tiny models (hidden <= 64) overfit in a few dozen steps on CPU."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from mwpgen.seq2seq.checkpoint import build_model, load_checkpoint, save_checkpoint
from mwpgen.seq2seq.decode import beam_search, decode_problems, greedy_decode, pad_batch, sequence_logprob
from mwpgen.seq2seq.train import (
    MODEL_PRESETS,
    TRAIN_PRESETS,
    collate,
    encode_example,
    make_batches,
    train_seq2seq,
    training_epochs,
)
from mwpgen.seq2seq.transformer import noam_lr, noam_scheduler
from mwpgen.seq2seq.vocab import BOS_ID, EOS_ID, PAD_ID, SEP, SPECIALS, UNK_ID, Vocab, build_vocabs, source_tokens

RECORDS = [
    {"id": "1", "text": "Joan found num1 seashells . She gave num2 away . How many are left ?",
     "equation": "x = ( num1 - num2 )"},
    {"id": "2", "text": "Tom has num1 boxes with num2 candies each . How many candies ?",
     "equation": "x = ( num1 * num2 )"},
    {"id": "3", "text": "A jar holds num1 marbles . Sam adds num2 . How many now ?", "equation": "x = ( num1 + num2 )"},
    {"id": "4", "text": "num1 dollars are shared by num2 kids . How much each ?", "equation": "x = ( num1 / num2 )"},
    {"id": "5", "text": "Mary picked num1 apples and num2 pears . How many fruits ?", "equation": "x = num1 + num2"},
]
KEYWORDS = {"1": ["Joan", "seashells"], "2": ["Tom", "boxes", "candies"], "3": ["jar", "marbles"],
            "4": ["dollars", "kids"], "5": ["Mary", "apples"]}

# Tiny versions of the baselines (with and without attention), with settings that overfit 5 examples quickly
# (Adam + a short Noam warm-up; the paper's Adagrad 0.15
# is exercised separately: from uniform(-0.1, 0.1) weights it needs far more than a few dozen steps).
CONFIGS = {
    "rnn": ({"kind": "rnn", "emb_dim": 32, "hidden": 64, "layers": 2, "attention": None, "dropout": 0.0},
            {"optimizer": "noam", "lr": 1.0, "warmup_steps": 10, "batch_size": 5}, 80),
    "attn-rnn": ({"kind": "rnn", "emb_dim": 32, "hidden": 64, "layers": 1, "attention": "general", "dropout": 0.0},
                 {"optimizer": "noam", "lr": 1.0, "warmup_steps": 10, "batch_size": 5}, 100),
    "transformer": ({"kind": "transformer", "d_model": 32, "heads": 4, "layers": 2, "ff": 64, "dropout": 0.0},
                    {"optimizer": "noam", "lr": 1.0, "warmup_steps": 10, "batch_size": 400, "batch_type": "tokens",
                     "normalization": "tokens", "max_grad_norm": 0.0}, 40),
}


@pytest.fixture(scope="module")
def vocabs():
    return build_vocabs(RECORDS, KEYWORDS)


@pytest.fixture(scope="module")
def examples(vocabs):
    src_vocab, tgt_vocab = vocabs
    return [encode_example(src_vocab, tgt_vocab, r["equation"], KEYWORDS[r["id"]], r["text"]) for r in RECORDS]


@pytest.fixture(scope="module", params=list(CONFIGS))
def trained(request, vocabs, examples, tmp_path_factory):
    """(name, model, training result, checkpoint dir): each model overfitted on the 5 examples."""
    src_vocab, tgt_vocab = vocabs
    model_cfg, train_cfg, steps = CONFIGS[request.param]
    model = build_model({**model_cfg, "src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab)}, seed=0)
    ckpt = tmp_path_factory.mktemp(request.param) / "ckpt"
    logs: list[dict] = []
    result = train_seq2seq(model, examples, steps=steps, seed=0, log_every=20, on_log=logs.append,
                           checkpoint_dir=ckpt, vocabs=vocabs, eval_every=0, patience=0, save_every=50, **train_cfg)
    result["on_log"] = logs
    return request.param, model, result, ckpt


# ---------------------------------------------------------------- vocabulary

def test_vocab_lowercases_and_maps_unseen_words_to_unk(vocabs):
    src_vocab, tgt_vocab = vocabs
    assert tuple(src_vocab.itos[:5]) == SPECIALS and tuple(tgt_vocab.itos[:5]) == SPECIALS
    assert "joan" in tgt_vocab and "Joan" not in tgt_vocab  # lowercased
    src = source_tokens("x = ( num1 - num2 )", ["Joan", "zeppelin"])
    assert src == ["x", "=", "(", "num1", "-", "num2", ")", SEP, "joan", "zeppelin"]
    ids = src_vocab.encode(src)
    assert ids[-1] == UNK_ID and ids[-2] == src_vocab.stoi["joan"]  # novel keyword -> <unk>
    assert src_vocab.encode(["seashells"]) != [UNK_ID]  # training keywords are in the source vocabulary
    assert "pears" in tgt_vocab and "pears" not in src_vocab  # source words come from equations + keywords only
    ids = [BOS_ID, tgt_vocab.stoi["joan"], UNK_ID, EOS_ID, tgt_vocab.stoi["tom"]]
    assert tgt_vocab.decode(ids) == ["joan", "<unk>"]  # stops at <eos>, drops <bos>, keeps <unk>


def test_vocab_min_freq_and_json_round_trip(tmp_path):
    vocab = Vocab.build([["a", "b", "a"], ["a", "c", "b"]], min_freq=2)
    assert vocab.itos[5:] == ["a", "b"] and vocab.encode(["c"]) == [UNK_ID]
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").itos == vocab.itos
    assert json.loads((tmp_path / "v.json").read_text())["itos"][:5] == list(SPECIALS)


def test_training_epochs_apply_keyword_dropout_reproducibly(vocabs):
    src_vocab, tgt_vocab = vocabs
    records = RECORDS * 20
    epochs = training_epochs(records, KEYWORDS, src_vocab, tgt_vocab, p=0.3, seed=1)
    first, again, second = epochs(0), epochs(0), epochs(1)
    assert first == again and first != second
    full = [len(KEYWORDS[r["id"]]) for r in records]
    kept = [len(src) - len(src_tokens_before_sep(src, src_vocab)) - 1 for src, _ in first]
    assert all(k <= f for k, f in zip(kept, full)) and sum(kept) < sum(full)


def src_tokens_before_sep(ids, vocab):
    return ids[: ids.index(vocab.stoi[SEP])]


def test_token_batches_respect_the_token_budget(examples):
    data = examples * 30
    batches = make_batches(data, batch_size=100, batch_type="tokens", rng=random.Random(0))
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    for b in batches:
        src, tgt_in, _ = collate([data[i] for i in b])
        assert len(b) * max(src.size(1), tgt_in.size(1)) <= 100
    by_examples = make_batches(data, batch_size=64, batch_type="examples", rng=random.Random(0))
    assert [len(b) for b in by_examples] == [64, 64, 22]


# ---------------------------------------------------------------- training and decoding

def test_loss_falls_and_greedy_reproduces_training_targets(trained, examples):
    name, model, result, _ = trained
    assert result["steps"] == CONFIGS[name][2]
    losses = [h["train_loss"] for h in result["history"]]
    first, last = sum(losses[:3]) / 3, losses[-1]
    assert first > 2.0 and last < 0.15 * first, (name, first, last)
    assert [r["step"] for r in result["on_log"]] == list(range(20, result["steps"] + 1, 20))
    hyps = greedy_decode(model, pad_batch([s for s, _ in examples]), max_len=40)
    assert sum(h.tokens == tgt and h.finished for h, (_, tgt) in zip(hyps, examples)) >= 4, name
    assert [h.tokens for h in hyps][0] == examples[0][1]


def test_greedy_score_is_the_model_log_probability(trained, examples):
    _, model, _, _ = trained
    src = pad_batch([s for s, _ in examples])
    hyps = greedy_decode(model, src, max_len=40)
    finished = [i for i, h in enumerate(hyps) if h.finished]
    forced = sequence_logprob(model, src[finished], [hyps[i].tokens for i in finished])
    assert forced == pytest.approx([hyps[i].logprob for i in finished], abs=1e-4)


def test_beam_is_greedy_at_width_one_and_never_worse(trained, examples):
    name, model, _, _ = trained
    src = pad_batch([s for s, _ in examples])
    greedy = greedy_decode(model, src, max_len=40)
    beam1 = beam_search(model, src, beam_size=1, max_len=40)
    assert [h.tokens for h in beam1] == [h.tokens for h in greedy]
    assert [h.logprob for h in beam1] == pytest.approx([h.logprob for h in greedy], abs=1e-4)
    for alpha in (0.0, 1.0):
        beam = beam_search(model, src, beam_size=4, max_len=40, alpha=alpha)
        for g, b in zip(greedy, beam):
            assert b.score(alpha) >= g.score(alpha) - 1e-5, (name, alpha)
    # Cut at max_len: beam 1 still equals greedy, and nothing is marked finished.
    short_g, short_b = greedy_decode(model, src, max_len=3), beam_search(model, src, beam_size=1, max_len=3)
    assert [h.tokens for h in short_b] == [h.tokens for h in short_g] and not any(h.finished for h in short_b)
    assert all(len(h.tokens) == 3 for h in short_g)


def test_decoding_does_not_leave_the_model_in_eval_mode(trained, examples):
    _, model, _, _ = trained
    model.train()
    greedy_decode(model, pad_batch([examples[0][0]]), max_len=5)
    assert model.training
    model.eval()


def test_checkpoint_round_trip_gives_identical_outputs(trained, examples, vocabs, tmp_path):
    name, model, _, ckpt = trained
    assert sorted(p.name for p in ckpt.iterdir()) == ["config.json", "model.safetensors", "src_vocab.json",
                                                      "tgt_vocab.json"]
    assert not [p for p in ckpt.parent.iterdir() if p.name.startswith(".")]  # no temp folders left behind
    config = json.loads((ckpt / "config.json").read_text())
    assert config["model"] == model.config and config["training"]["steps"] == CONFIGS[name][2]
    # The training summary keeps its layout, without the wall time: the folder is the same byte for byte across runs.
    assert list(config["training"]) == ["steps", "epochs", "tokens", "optimizer", "lr", "batch_size",
                                        "batch_type", "warmup_steps", "max_grad_norm", "label_smoothing",
                                        "normalization", "seed", "final_loss", "val", "best_step", "best_val_loss",
                                        "stopped_early"]
    loaded, src_vocab, tgt_vocab = load_checkpoint(ckpt)
    assert src_vocab.itos == vocabs[0].itos and tgt_vocab.itos == vocabs[1].itos
    src = pad_batch([s for s, _ in examples])
    tgt_in = collate(examples)[1]
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(src, tgt_in), loaded(src, tgt_in))
    sources = [source_tokens(r["equation"], KEYWORDS[r["id"]]) for r in RECORDS]
    assert decode_problems(loaded, src_vocab, tgt_vocab, sources, beam_size=3, max_len=40) == \
        decode_problems(model, *vocabs, sources, beam_size=3, max_len=40)
    texts = decode_problems(loaded, src_vocab, tgt_vocab, sources, max_len=40, batch_size=2)
    assert texts[0] == RECORDS[0]["text"].lower()
    # Saving again over an existing checkpoint replaces it atomically.
    save_checkpoint(ckpt, loaded, src_vocab, tgt_vocab)
    assert load_checkpoint(ckpt)[0].config == model.config


def test_paper_adagrad_setting_reduces_the_loss(vocabs, examples):
    src_vocab, tgt_vocab = vocabs
    model = build_model({**CONFIGS["attn-rnn"][0], "src_vocab_size": len(src_vocab),
                         "tgt_vocab_size": len(tgt_vocab)}, seed=0)
    result = train_seq2seq(model, examples, steps=25, seed=0, **{**TRAIN_PRESETS["seq2seq-rnn"], "batch_size": 5},
                           log_every=100, eval_every=0, patience=0, save_every=50)
    assert result["history"][-1]["train_loss"] < 0.8 * result["history"][0]["train_loss"]
    assert result["log"][-1]["lr"] == pytest.approx(0.15)


def test_build_model_is_seeded_and_presets_match_the_paper():
    cfg = {**CONFIGS["transformer"][0], "src_vocab_size": 20, "tgt_vocab_size": 30}
    a, b = build_model(cfg, seed=3), build_model(cfg, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert MODEL_PRESETS["seq2seq-rnn"]["layers"] == 2
    assert (MODEL_PRESETS["seq2seq-rnn"]["emb_dim"], MODEL_PRESETS["seq2seq-rnn"]["hidden"]) == (300, 512)
    assert (MODEL_PRESETS["seq2seq-transformer"]["layers"], MODEL_PRESETS["seq2seq-transformer"]["d_model"]) == (6, 512)
    assert TRAIN_PRESETS["seq2seq-rnn"]["optimizer"] == "adagrad" and TRAIN_PRESETS["seq2seq-rnn"]["lr"] == 0.15
    assert TRAIN_PRESETS["seq2seq-transformer"]["batch_type"] == "tokens"
    assert TRAIN_PRESETS["seq2seq-transformer"]["batch_size"] == 4096
    with pytest.raises(ValueError):
        build_model({"kind": "gru", "src_vocab_size": 5, "tgt_vocab_size": 5})


def test_noam_schedule_matches_the_formula():
    d, warmup, factor = 512, 8000, 2.0

    def formula(step):
        return factor * d ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)

    for step in (1, 100, 4000, 8000, 8001, 15000):
        assert noam_lr(step, d_model=d, warmup=warmup, factor=factor) == pytest.approx(formula(step), rel=1e-12)
    assert noam_lr(8000, d_model=d, warmup=warmup, factor=factor) == pytest.approx(2 * 512 ** -0.5 / math.sqrt(8000))
    assert noam_lr(100, d_model=d, warmup=warmup) == pytest.approx(2 * 512 ** -0.5 * 100 * 8000 ** -1.5)
    # As a scheduler, the k-th optimizer step (1-based) uses noam_lr(k).
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = noam_scheduler(opt, d_model=d, warmup=warmup, factor=factor)
    seen = []
    for _ in range(3):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([formula(1), formula(2), formula(3)])
    with pytest.raises(ValueError):
        noam_scheduler(torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.1), d_model=d, warmup=warmup)


def test_collate_adds_bos_eos_and_pads():
    src, tgt_in, tgt_out = collate([([5, 6, 7], [8]), ([5], [9, 10])])
    assert src.tolist() == [[5, 6, 7], [5, PAD_ID, PAD_ID]]
    assert tgt_in.tolist() == [[BOS_ID, 8, PAD_ID], [BOS_ID, 9, 10]]
    assert tgt_out.tolist() == [[8, EOS_ID, PAD_ID], [9, 10, EOS_ID]]


@pytest.mark.parametrize("extra", [{"layers": 2, "attention": "general"}, {"layers": 1, "attention": "dot"},
                                   {"layers": 3, "attention": None}])
def test_stepwise_decoding_matches_teacher_forcing_for_other_rnn_shapes(vocabs, examples, extra):
    """The paper-default shape (2 layers + attention) and the other options, untrained: the step-by-step decoder
    (decode.py) and the teacher-forced forward (training) must give the same log-probs."""
    src_vocab, tgt_vocab = vocabs
    model = build_model({**CONFIGS["rnn"][0], **extra, "src_vocab_size": len(src_vocab),
                         "tgt_vocab_size": len(tgt_vocab)}, seed=1).eval()
    src = pad_batch([s for s, _ in examples])
    hyps = greedy_decode(model, src, max_len=6)
    with torch.no_grad():
        logp = torch.log_softmax(model(src, collate([(s, h.tokens) for (s, _), h in zip(examples, hyps)])[1]), -1)
    for i, h in enumerate(hyps):
        forced = sum(logp[i, t, tok].item() for t, tok in enumerate(h.tokens + [EOS_ID] * h.finished))
        assert forced == pytest.approx(h.logprob, abs=1e-4)


# ---------------------------------------------------------------- validation, early stopping, resume

def _fresh(vocabs, name="transformer"):
    src_vocab, tgt_vocab = vocabs
    model_cfg, train_cfg, _ = CONFIGS[name]
    cfg = {**model_cfg, "dropout": 0.1, "src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab)}
    return build_model(cfg, seed=0), train_cfg


def test_validation_keeps_the_best_weights_and_stops_early(vocabs, examples):
    model, train_cfg = _fresh(vocabs)
    # Validation on other problems than the training ones: overfitting 3 examples raises its NLL at some point.
    result = train_seq2seq(model, examples[:3] * 2, steps=200, seed=0, log_every=1000, validation=examples[3:],
                           eval_every=5, patience=3, save_every=50, **train_cfg)
    steps, losses = [v["step"] for v in result["validations"]], [v["val_loss"] for v in result["validations"]]
    assert steps[:2] == [5, 10] and result["best_val_loss"] == min(losses)
    assert result["best_step"] == steps[losses.index(min(losses))]
    assert result["stopped_early"] and result["steps"] < 200
    assert all(v > result["best_val_loss"] for v in losses[-3:])  # three measurements without a new best
    from mwpgen.seq2seq.train import validation_nll

    assert validation_nll(model, examples[3:], "cpu") == pytest.approx(result["best_val_loss"], abs=1e-6)


def test_a_killed_run_resumes_to_the_same_weights(vocabs, examples, tmp_path):
    def run(on_log=None):
        model, train_cfg = _fresh(vocabs)
        out = train_seq2seq(model, examples, steps=14, seed=0, log_every=1, on_log=on_log, validation=examples[:2],
                            eval_every=4, patience=0, resume_dir=tmp_path / "state", save_every=3, **train_cfg)
        return model, out

    reference, ref_out = run()
    assert not (tmp_path / "state" / "state.pt").exists()  # the finished run drops its state

    class Killed(Exception):
        pass

    def kill_at_8(record):
        if record["step"] == 8:
            raise Killed
    with pytest.raises(Killed):
        run(kill_at_8)
    assert (tmp_path / "state" / "state.pt").exists()  # written at step 6
    resumed, out = run()
    assert [h["train_loss"] for h in out["history"]] == [h["train_loss"] for h in ref_out["history"]]
    assert out["validations"] == ref_out["validations"]
    assert all(torch.equal(a, b) for a, b in zip(reference.state_dict().values(), resumed.state_dict().values()))
