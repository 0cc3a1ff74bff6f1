"""The three seq2seq baselines of the paper's Tables 2-3, from `params.train.seq2seq` to a checkpoint and back.

    seq2seq_rnn        2-layer LSTM encoder-decoder with attention (preset "seq2seq-rnn", Adagrad 0.15)
    seq2seq_rnn_glove  the same, word embeddings initialised from GloVe 300d (Pennington et al. 2014)
    seq2seq_tf         transformer encoder-decoder (preset "seq2seq-transformer", Adam + Noam)

The presets in train.py hold the paper's configuration table; `params.train.seq2seq` only overrides the sizes
and schedule that must shrink to fit a CPU (everything it does not name -- dropout, optimizer, clipping, label
smoothing, normalisation -- stays the paper's). `baseline_setup` returns exactly what is run, so a stage can
log it and a test can check that the paper's sizes reproduce the presets.

GloVe is never substituted silently: when no vectors can be had (no local file, no cache, no network),
`train_baseline` trains nothing and returns `{"not_run": reason}`. The train stage records that reason in
`NOT_RUN_FILE` inside the (otherwise empty) checkpoint folder, which the generate / evaluate stages read with
`read_not_run` to report the row as not run instead of failing.

Plain library code: no Prefect, no MLflow (tasks/seq2seq.py and flows/train_seq2seq.py wrap it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mwpgen import registry
from mwpgen.seq2seq.glove import GLOVE_DIM, GloveUnavailable, embedding_matrix, load_glove

from .checkpoint import build_model
from .train import MODEL_PRESETS, TRAIN_PRESETS, encode_example, train_seq2seq, training_epochs
from .vocab import build_vocabs

SEQ2SEQ_MODELS = registry.names("seq2seq")


def training_steps(cfg, dataset: str) -> int:
    """`cfg.steps`, times `math23k_steps_factor` on Math23K (the paper: 5,000 and 15,000 steps)."""
    return max(1, round(cfg.steps * cfg.math23k_steps_factor)) if dataset == "math23k" else cfg.steps


def baseline_setup(cfg, model: str, dataset: str, src_vocab_size: int, tgt_vocab_size: int) -> dict[str, Any]:
    """What one baseline runs: {"preset", "glove", "model": build_model config, "train": train_seq2seq kwargs}.

    `cfg` is a mwpgen.config.Seq2SeqTrainParams. Preset values are overridden only by the fields it names."""
    if model not in SEQ2SEQ_MODELS:
        raise ValueError(f"unknown seq2seq baseline {model!r}; expected one of {SEQ2SEQ_MODELS}")
    preset = registry.spec(model).preset
    model_cfg = {**MODEL_PRESETS[preset], "src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size}
    train_cfg = {**TRAIN_PRESETS[preset], "steps": training_steps(cfg, dataset)}
    if model_cfg["kind"] == "rnn":
        # Paper: 2 layers of 512 (hidden) over 300-d embeddings, Adagrad 0.15, batches of 64 sentences.
        model_cfg.update(emb_dim=cfg.emb_dim, hidden=cfg.rnn_hidden, layers=cfg.rnn_layers)
        train_cfg.update(lr=cfg.rnn_lr, batch_size=cfg.rnn_batch_size)
    else:
        # Paper: 6 layers of 512, batches of ~4,096 tokens; OpenNMT's recipe: 8 heads, ff 2048, warm-up 8,000.
        if cfg.tf_d_model % cfg.tf_heads:
            raise ValueError(f"tf_d_model {cfg.tf_d_model} is not divisible by tf_heads {cfg.tf_heads}")
        model_cfg.update(d_model=cfg.tf_d_model, heads=cfg.tf_heads, layers=cfg.tf_layers, ff=cfg.tf_ff)
        train_cfg.update(batch_size=cfg.tf_batch_tokens, warmup_steps=cfg.tf_warmup_steps)
    return {"preset": preset, "glove": registry.spec(model).glove, "model": model_cfg, "train": train_cfg}


def _glove_init(model: torch.nn.Module, src_vocab, tgt_vocab, *, dim: int, path: str, cache_dir, seed: int) -> dict:
    """Load GloVe rows for every source and target word into the RNN's embeddings; returns the coverage.
    Raises GloveUnavailable when there are no vectors (the caller reports the run as not run)."""
    if not path and dim != GLOVE_DIM:
        raise ValueError(f"the official GloVe file has {GLOVE_DIM}-d vectors, but emb_dim is {dim}")
    words = set(src_vocab.itos) | set(tgt_vocab.itos)
    vectors = load_glove(path or None, cache_dir=cache_dir, words=words, dim=dim)
    rng = np.random.default_rng(seed)  # rows without a vector: uniform(-0.1, 0.1), the RNN's own init
    src = embedding_matrix(src_vocab, vectors, dim, rng)
    tgt = embedding_matrix(tgt_vocab, vectors, dim, rng)
    model.init_embeddings(src=torch.from_numpy(src.matrix), tgt=torch.from_numpy(tgt.matrix))
    return {"source": "file" if path else "official", "path": str(path) if path else None,
            "src_found": src.found, "src_total": src.total, "src_coverage": round(src.coverage, 4),
            "tgt_found": tgt.found, "tgt_total": tgt.total, "tgt_coverage": round(tgt.coverage, 4)}


def train_baseline(cfg, model: str, dataset: str, train_records: Sequence[Mapping[str, str]],
                   train_keywords: Mapping[str, Sequence[str]], checkpoint_dir: str | os.PathLike, *,
                   keyword_dropout: float = 0.3, seed: int = 0, device: str | torch.device = "cpu",
                   glove_cache_dir: str | os.PathLike | None = None, log_every: int = 50,
                   on_log: Callable[[dict], None] | None = None, validation_records: Sequence[dict] = (),
                   resume_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Train one baseline on the training fold and save it with save_checkpoint into `checkpoint_dir`.

    Vocabularies come from the training records and their full keyword lists; every epoch draws fresh keyword
    dropout (p `keyword_dropout`, supplementary "Training Details"); `validation_records` (with their full keyword
    lists, also in `train_keywords`) choose the kept weights and stop training early (cfg.eval_every, cfg.patience);
    `resume_dir` holds the state a killed run resumes from. Returns {"not_run": None, "setup",
    "n_train", "src_vocab_size", "tgt_vocab_size", "n_params", "glove" (coverage or None), "train": train_seq2seq's
    result}; for seq2seq_rnn_glove without GloVe vectors: {"not_run": reason, ...} and nothing is written."""
    src_vocab, tgt_vocab = build_vocabs(train_records, train_keywords)
    setup = baseline_setup(cfg, model, dataset, len(src_vocab), len(tgt_vocab))
    print(f"{model} on {dataset}: {json.dumps(setup)}", flush=True)
    info: dict[str, Any] = {"not_run": None, "setup": setup, "n_train": len(train_records),
                            "src_vocab_size": len(src_vocab), "tgt_vocab_size": len(tgt_vocab), "glove": None}
    net = build_model(setup["model"], seed=seed)
    info["n_params"] = sum(p.numel() for p in net.parameters())
    if setup["glove"]:
        try:
            info["glove"] = _glove_init(net, src_vocab, tgt_vocab, dim=setup["model"]["emb_dim"],
                                        path=cfg.glove_path, cache_dir=glove_cache_dir, seed=seed)
        except GloveUnavailable as e:
            return {**info, "not_run": f"no GloVe vectors: {e}"}
    examples = training_epochs(train_records, train_keywords, src_vocab, tgt_vocab, p=keyword_dropout, seed=seed)
    validation = [encode_example(src_vocab, tgt_vocab, r["equation"], train_keywords.get(r["id"], ()), r["text"])
                  for r in validation_records]
    info["train"] = train_seq2seq(net, examples, **setup["train"], seed=seed, device=device, log_every=log_every,
                                  on_log=on_log, checkpoint_dir=checkpoint_dir, vocabs=(src_vocab, tgt_vocab),
                                  validation=validation, eval_every=cfg.eval_every, patience=cfg.patience,
                                  resume_dir=resume_dir, save_every=cfg.save_every,
                                  fingerprint_extra={"model": model, "dataset": dataset, "glove": info["glove"]})
    return info


