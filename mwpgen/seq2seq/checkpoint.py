"""A trained seq2seq baseline on disk: the model's constructor and its checkpoint folder, what the training writes
and generation reads, apart from both.

A checkpoint is a folder: model.safetensors (state dict), config.json (model constructor arguments + training
summary), src_vocab.json, tgt_vocab.json; written into a temp folder beside it, then renamed into place. A baseline
that could not run is a not-run marker instead (not_run.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from mwpgen.io import DataFormatError, atomic_directory

from .rnn import Seq2SeqRNN
from .transformer import Seq2SeqTransformer
from .vocab import Vocab

CHECKPOINT_FORMAT = "mwpgen-seq2seq/1"


def build_model(config: Mapping[str, Any], *, seed: int | None = None) -> torch.nn.Module:
    """Model from a config dict ("kind" + constructor arguments, incl. the vocabulary sizes). With `seed`, the
    initial weights depend only on it (the global RNG is left as it was)."""
    config = dict(config)
    kind = config.pop("kind")
    cls = {"rnn": Seq2SeqRNN, "transformer": Seq2SeqTransformer}.get(kind)
    if cls is None:
        raise ValueError(f"unknown seq2seq model kind {kind!r}")
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return cls(**config)


def save_checkpoint(out_dir: str | os.PathLike, model: torch.nn.Module, src_vocab: Vocab, tgt_vocab: Vocab, *,
                    training: Mapping[str, Any] | None = None) -> Path:
    """Write the checkpoint folder atomically: a killed process leaves only a `.tmp-*` sibling."""
    out_dir = Path(out_dir)
    with atomic_directory(out_dir) as tmp:
        # clone(): safetensors refuses tensors that share storage; contiguous CPU copies are always accepted.
        save_file({k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()},
                  str(tmp / "model.safetensors"))
        config = {"format": CHECKPOINT_FORMAT, "model": model.config, "training": dict(training or {})}
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        src_vocab.save(tmp / "src_vocab.json")
        tgt_vocab.save(tmp / "tgt_vocab.json")
    return out_dir


def load_checkpoint(ckpt_dir: str | os.PathLike,
                    device: str | torch.device = "cpu") -> tuple[torch.nn.Module, Vocab, Vocab]:
    """(model in eval mode, src_vocab, tgt_vocab) from a save_checkpoint folder."""
    ckpt_dir = Path(ckpt_dir)
    config_path = ckpt_dir / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataFormatError(config_path, f"invalid JSON ({e.msg})", e.lineno, e.colno) from e
    if config.get("format") != CHECKPOINT_FORMAT:
        raise DataFormatError(config_path, f"not a {CHECKPOINT_FORMAT} checkpoint (format {config.get('format')!r})")
    src_vocab, tgt_vocab = Vocab.load(ckpt_dir / "src_vocab.json"), Vocab.load(ckpt_dir / "tgt_vocab.json")
    model_cfg = config["model"]
    if (model_cfg["src_vocab_size"], model_cfg["tgt_vocab_size"]) != (len(src_vocab), len(tgt_vocab)):
        raise DataFormatError(ckpt_dir, "vocabulary files do not match the model's vocabulary sizes")
    model = build_model(model_cfg)
    model.load_state_dict(load_file(str(ckpt_dir / "model.safetensors")))
    return model.to(device).eval(), src_vocab, tgt_vocab
