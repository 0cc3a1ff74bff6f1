"""The seq2seq baselines from params to checkpoint and back (mwpgen/seq2seq/baseline.py), on 6 tiny problems
with tiny sizes: the whole file runs in seconds on one CPU thread."""

from __future__ import annotations

import json
import math
import shutil
import urllib.error
from pathlib import Path

import pytest
import test_seq2seq as seq2seq_unit
import torch
import yaml
from safetensors.torch import load_file

from mwpgen.config.profiles import apply_profile
from mwpgen.config.schema import Seq2SeqTrainParams, load_params
from mwpgen.io import DataFormatError
from mwpgen.seq2seq import glove
from mwpgen.seq2seq.baseline import SEQ2SEQ_MODELS, baseline_setup, train_baseline
from mwpgen.seq2seq.checkpoint import load_checkpoint
from mwpgen.seq2seq.decode import generate_baseline
from mwpgen.seq2seq.not_run import NOT_RUN_FILE, read_not_run, write_not_run
from mwpgen.seq2seq.train import MODEL_PRESETS, TRAIN_PRESETS, paper_steps

ROOT = Path(__file__).resolve().parents[2]

# test_seq2seq.py's five problems plus one more.
RECORDS = [*seq2seq_unit.RECORDS, {"id": "6", "text": "Sam had num1 apples . He ate num2 . How many apples now ?",
                                   "equation": "x = num1 - num2"}]
KEYWORDS = {**seq2seq_unit.KEYWORDS, "6": ["Sam", "apples"]}

# Tiny sizes; everything the params do not name (optimizer, dropout, ...) stays the paper's preset.
TINY = dict(steps=12, emb_dim=8, rnn_hidden=16, rnn_layers=2, rnn_batch_size=3, tf_d_model=16, tf_heads=2,
            tf_layers=1, tf_ff=32, tf_batch_tokens=200, tf_warmup_steps=4, num_beams=3, max_len=12)
GLOVE_VALUE = 10.0  # far outside the uniform(-0.1, 0.1) init, so GloVe rows are recognisable after training
GLOVE_WORDS = ("apples", "joan", "how", "many", "zzz-not-in-vocab")

CPU = dict(steps=600, math23k_steps_factor=3.0, emb_dim=300, rnn_hidden=256, rnn_layers=2, rnn_batch_size=64,
           rnn_lr=0.15, tf_d_model=256, tf_heads=4, tf_layers=3, tf_ff=1024, tf_batch_tokens=2048,
           tf_warmup_steps=960)
PAPER = dict(steps=5000, math23k_steps_factor=3.0, emb_dim=300, rnn_hidden=512, rnn_layers=2, rnn_batch_size=64,
             rnn_lr=0.15, tf_d_model=512, tf_heads=8, tf_layers=6, tf_ff=2048, tf_batch_tokens=4096,
             tf_warmup_steps=8000)


def tiny_glove(path: Path, dim: int = 8) -> Path:
    path.write_text("".join(f"{w} " + " ".join([str(GLOVE_VALUE)] * dim) + "\n" for w in GLOVE_WORDS),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------- params -> what is run

def test_cpu_sizes_override_only_the_sizes_and_schedule():
    cfg = Seq2SeqTrainParams(**CPU)
    rnn = baseline_setup(cfg, "seq2seq_rnn", "arithmetic", 50, 70)
    assert rnn["preset"] == "seq2seq-rnn" and rnn["glove"] is False
    assert rnn["model"] == {"kind": "rnn", "src_vocab_size": 50, "tgt_vocab_size": 70, "emb_dim": 300, "hidden": 256,
                            "layers": 2, "attention": "general", "dropout": 0.3}
    assert rnn["train"] == {**TRAIN_PRESETS["seq2seq-rnn"], "steps": 600, "lr": 0.15, "batch_size": 64}
    glove_run = baseline_setup(cfg, "seq2seq_rnn_glove", "arithmetic", 50, 70)
    assert glove_run["glove"] is True and {k: glove_run[k] for k in ("model", "train")} == \
        {k: rnn[k] for k in ("model", "train")}
    tf = baseline_setup(cfg, "seq2seq_tf", "mawps", 50, 70)
    assert tf["model"] == {"kind": "transformer", "src_vocab_size": 50, "tgt_vocab_size": 70, "d_model": 256,
                           "heads": 4, "layers": 3, "ff": 1024, "dropout": 0.1}
    assert tf["train"] == {"optimizer": "noam", "lr": 2.0, "warmup_steps": 960, "batch_size": 2048,
                           "batch_type": "tokens", "max_grad_norm": 0.0, "label_smoothing": 0.1,
                           "normalization": "tokens", "steps": 600}
    assert baseline_setup(cfg, "seq2seq_tf", "math23k", 50, 70)["train"]["steps"] == 1800  # 600 x 3


@pytest.mark.parametrize("model", SEQ2SEQ_MODELS)
def test_params_yaml_values_are_what_is_run(model):
    cfg = load_params(ROOT / "params.yaml").train.seq2seq
    setup = baseline_setup(cfg, model, "arithmetic", 10, 20)
    named = {"emb_dim": "emb_dim", "hidden": "rnn_hidden", "layers": "rnn_layers"} if setup["model"]["kind"] == "rnn" \
        else {"d_model": "tf_d_model", "heads": "tf_heads", "layers": "tf_layers", "ff": "tf_ff"}
    assert {k: setup["model"][k] for k in named} == {k: getattr(cfg, f) for k, f in named.items()}
    assert setup["train"]["steps"] == cfg.steps
    if setup["model"]["kind"] == "rnn":
        assert (setup["train"]["lr"], setup["train"]["batch_size"]) == (cfg.rnn_lr, cfg.rnn_batch_size)
    else:
        assert (setup["train"]["warmup_steps"], setup["train"]["batch_size"]) == (cfg.tf_warmup_steps,
                                                                                   cfg.tf_batch_tokens)


@pytest.mark.parametrize("model", SEQ2SEQ_MODELS)
@pytest.mark.parametrize("dataset", ["arithmetic", "math23k"])
def test_paper_sizes_reproduce_the_paper_presets(model, dataset):
    setup = baseline_setup(Seq2SeqTrainParams(**PAPER), model, dataset, 10, 20)
    preset = setup["preset"]
    assert {k: v for k, v in setup["model"].items() if not k.endswith("vocab_size")} == MODEL_PRESETS[preset]
    assert {k: v for k, v in setup["train"].items() if k != "steps"} == TRAIN_PRESETS[preset]
    assert setup["train"]["steps"] == paper_steps(dataset)  # 5,000; 15,000 for Math23K


def test_paper_profile_sets_the_paper_sizes(tmp_path):
    profile = yaml.safe_load((ROOT / "profiles" / "paper.yaml").read_text(encoding="utf-8")) or {}
    if "seq2seq" not in (profile.get("train") or {}):
        pytest.skip("profiles/paper.yaml has no train.seq2seq section yet")
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    apply_profile(tmp_path / "params.yaml", ROOT / "profiles" / "paper.yaml")
    cfg = load_params(tmp_path / "params.yaml").train.seq2seq
    assert {k: getattr(cfg, k) for k in PAPER} == PAPER


def test_bad_model_or_shape_is_rejected():
    with pytest.raises(ValueError, match="unknown seq2seq baseline"):
        baseline_setup(Seq2SeqTrainParams(), "gpt", "arithmetic", 10, 10)
    with pytest.raises(ValueError, match="divisible"):
        baseline_setup(Seq2SeqTrainParams(tf_d_model=100, tf_heads=8), "seq2seq_tf", "arithmetic", 10, 10)


# ---------------------------------------------------------------- train -> checkpoint -> generate

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """model name -> (train_baseline's result, checkpoint dir), for each of the three baselines."""
    out = {}
    for model in SEQ2SEQ_MODELS:
        tmp = tmp_path_factory.mktemp(model)
        cfg = Seq2SeqTrainParams(**TINY, glove_path=str(tiny_glove(tmp / "glove.txt")))
        logs: list[dict] = []
        result = train_baseline(cfg, model, "arithmetic", RECORDS, KEYWORDS, tmp / "ckpt", seed=7, log_every=4,
                                on_log=logs.append)
        out[model] = (result, tmp / "ckpt", logs)
    return out


def train_losses(result: dict) -> list[float]:
    return [h["train_loss"] for h in result["train"]["history"]]


@pytest.mark.parametrize("model", SEQ2SEQ_MODELS)
def test_train_saves_a_checkpoint_of_the_sizes_run(trained, model):
    result, ckpt, logs = trained[model]
    assert result["not_run"] is None and read_not_run(ckpt) is None
    losses = train_losses(result)
    assert result["n_train"] == 6 and result["train"]["steps"] == 12 == len(losses)
    assert [rec["step"] for rec in logs] == [4, 8, 12]
    assert all(math.isfinite(loss) and loss > 0 for loss in losses)
    net, src_vocab, tgt_vocab = load_checkpoint(ckpt)
    assert result["setup"]["model"].items() <= net.config.items()  # + constructor defaults (param_init, ...)
    assert (len(src_vocab), len(tgt_vocab)) == (result["src_vocab_size"], result["tgt_vocab_size"])
    assert "joan" in src_vocab and "seashells" in tgt_vocab  # lowercased training-fold words
    assert result["n_params"] == sum(p.numel() for p in net.parameters())
    saved = json.loads((ckpt / "config.json").read_text())["training"]
    assert saved["seed"] == 7 and saved["optimizer"] == result["setup"]["train"]["optimizer"]


@pytest.mark.parametrize("model", SEQ2SEQ_MODELS)
@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_generate_gives_one_problem_per_input_from_the_target_vocabulary(trained, model, decoding):
    _, ckpt, _ = trained[model]
    _, _, tgt_vocab = load_checkpoint(ckpt)
    equations = [r["equation"] for r in RECORDS[:3]] + ["x = num1 * num2 * num3"]
    keywords = [KEYWORDS[r["id"]] for r in RECORDS[:3]] + [["Zebra", "never-seen"]]  # OOV keywords -> <unk>
    texts = generate_baseline(ckpt, equations, keywords, decoding, 3, 12, "cpu")
    assert len(texts) == 4 and all(isinstance(t, str) for t in texts)
    for text in texts:
        assert len(text.split()) <= 12 and set(text.split()) <= set(tgt_vocab.itos)
    assert generate_baseline(ckpt, equations, keywords, decoding, 3, 12, "cpu") == texts  # deterministic
    with pytest.raises(ValueError, match="keyword lists"):
        generate_baseline(ckpt, equations, keywords[:2], decoding, 3, 12, "cpu")


def test_training_is_reproducible_from_the_seed(trained, tmp_path):
    result, ckpt, _ = trained["seq2seq_rnn"]
    again = train_baseline(Seq2SeqTrainParams(**TINY), "seq2seq_rnn", "arithmetic", RECORDS, KEYWORDS,
                           tmp_path / "again", seed=7)
    assert train_losses(again) == train_losses(result)
    first, second = load_file(str(ckpt / "model.safetensors")), load_file(str(tmp_path / "again" / "model.safetensors"))
    assert all(torch.equal(first[k], second[k]) for k in first)
    other = train_baseline(Seq2SeqTrainParams(**{**TINY, "steps": 2}), "seq2seq_rnn", "arithmetic", RECORDS,
                           KEYWORDS, tmp_path / "other", seed=8)
    assert train_losses(other) != train_losses(result)[:2]  # the seed is really used


def test_glove_rows_initialise_both_embeddings(trained):
    result, ckpt, _ = trained["seq2seq_rnn_glove"]
    info = result["glove"]
    _, src_vocab, tgt_vocab = load_checkpoint(ckpt)
    # Source words in the file: joan, apples; target words: joan, apples, how, many (lowercased vocabularies).
    assert (info["src_found"], info["src_total"]) == (2, len(src_vocab) - 5)
    assert (info["tgt_found"], info["tgt_total"]) == (4, len(tgt_vocab) - 5)
    assert info["tgt_coverage"] == pytest.approx(4 / (len(tgt_vocab) - 5), abs=1e-4)
    weights = load_file(str(ckpt / "model.safetensors"))
    # 12 Adagrad steps move a weight by far less than 5: rows that started at 10 are GloVe rows.
    assert (weights["src_emb.weight"][src_vocab.stoi["apples"]] > 5).all()
    assert (weights["tgt_emb.weight"][tgt_vocab.stoi["many"]] > 5).all()
    assert (weights["tgt_emb.weight"][tgt_vocab.stoi["seashells"]].abs() < 5).all()  # no vector: random init
    plain = trained["seq2seq_rnn"][0]
    assert plain["glove"] is None


# ---------------------------------------------------------------- GloVe unavailable: reported, never substituted

def test_missing_glove_file_is_not_run_with_its_reason(tmp_path):
    cfg = Seq2SeqTrainParams(**TINY, glove_path=str(tmp_path / "nope.txt"))
    result = train_baseline(cfg, "seq2seq_rnn_glove", "arithmetic", RECORDS, KEYWORDS, tmp_path / "ckpt")
    assert result["not_run"].startswith("no GloVe vectors") and "nope.txt does not exist" in result["not_run"]
    assert "train" not in result and not (tmp_path / "ckpt").exists()


def test_failed_download_is_not_run(tmp_path, monkeypatch):
    def offline(url, dest, timeout=glove.DOWNLOAD_TIMEOUT_S):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(glove, "_download", offline)
    cfg = Seq2SeqTrainParams(**{**TINY, "emb_dim": 300})  # the official file's 300 dimensions
    result = train_baseline(cfg, "seq2seq_rnn_glove", "arithmetic", RECORDS, KEYWORDS, tmp_path / "ckpt",
                            glove_cache_dir=tmp_path / "cache")
    assert "could not be downloaded" in result["not_run"] and "name resolution" in result["not_run"]
    assert not (tmp_path / "ckpt").exists()
    with pytest.raises(ValueError, match="300-d"):  # the official file cannot fill 8-d embeddings
        train_baseline(Seq2SeqTrainParams(**TINY), "seq2seq_rnn_glove", "arithmetic", RECORDS, KEYWORDS,
                       tmp_path / "ckpt", glove_cache_dir=tmp_path / "cache")


def test_not_run_marker_replaces_a_stale_checkpoint_and_blocks_generation(trained, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(trained["seq2seq_rnn"][1], ckpt)
    assert read_not_run(ckpt) is None
    write_not_run(ckpt, "no GloVe vectors: offline")
    assert sorted(p.name for p in ckpt.iterdir()) == [NOT_RUN_FILE]
    assert json.loads((ckpt / NOT_RUN_FILE).read_text()) == {"not_run": "no GloVe vectors: offline"}
    assert read_not_run(ckpt) == "no GloVe vectors: offline"
    with pytest.raises(RuntimeError, match="not trained: no GloVe vectors: offline"):
        generate_baseline(ckpt, ["x = num1"], [[]], "greedy", 1, 5, "cpu")
    (ckpt / NOT_RUN_FILE).write_text("{oops", encoding="utf-8")
    with pytest.raises(DataFormatError, match=NOT_RUN_FILE):
        read_not_run(ckpt)
