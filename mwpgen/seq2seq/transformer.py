"""Transformer encoder-decoder ("seq2seq-tf" / "seq2seq-transformer") and the Noam learning-rate schedule.

Plain-PyTorch equivalent of OpenNMT-py's transformer recipe, which the paper's settings (6 layers, 512, Adam,
learning rate 2, batch 4,096 tokens) are taken from: 8 heads, feed-forward 2048, dropout 0.1, pre-layer-norm
blocks with a final layer norm (OpenNMT's layout), sinusoidal positions added to embeddings scaled by sqrt(d),
Xavier-uniform init (-param_init_glorot).

Embeddings: separate source and target embeddings and a separate (untied) output projection, as in that
recipe: source (equation symbols + keywords) and target (problem text) have different vocabularies, and with a
few thousand target words this gives about the 52M parameters the paper reports.

Decoding interface as in rnn.py. `decode_step` re-runs the decoder over the whole prefix (kept in the state)
instead of caching keys/values: O(T^2) per sequence, but problems are short (< ~200 tokens) and it keeps the
module a thin wrapper around nn.TransformerDecoder.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .vocab import PAD_ID


def noam_lr(step: int, *, d_model: int, warmup: int, factor: float = 2.0) -> float:
    """lr = factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5) (Vaswani et al. 2017; OpenNMT -decay_method
    noam). `step` counts optimizer steps from 1; linear warm-up to the peak at `warmup`, then ~ 1/sqrt(step)."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def noam_scheduler(optimizer: torch.optim.Optimizer, *, d_model: int, warmup: int,
                   factor: float = 2.0) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR giving the Noam rate; the optimizer must be built with lr=1.0 (LambdaLR multiplies it).
    LambdaLR's counter starts at 0 for the first update, hence step + 1."""
    for group in optimizer.param_groups:
        if group["lr"] != 1.0:
            raise ValueError("build the optimizer with lr=1.0: the Noam lambda is the learning rate itself")
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: noam_lr(i + 1, d_model=d_model, warmup=warmup, factor=factor))


class PositionalEncoding(nn.Module):
    """Fixed sinusoidal positions: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""

    def __init__(self, d_model: int, max_len: int = 1024):
        super().__init__()
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)[:, : d_model // 2]
        self.register_buffer("pe", pe, persistent=False)  # recomputed, so not part of the checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(1) > self.pe.size(0):
            raise ValueError(f"sequence of {x.size(1)} tokens exceeds max_len {self.pe.size(0)}")
        return x + self.pe[: x.size(1)]


class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, d_model: int = 512, heads: int = 8,
                 layers: int = 6, ff: int = 2048, dropout: float = 0.1, max_len: int = 1024):
        super().__init__()
        self.config = {"kind": "transformer", "src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size,
                       "d_model": d_model, "heads": heads, "layers": layers, "ff": ff, "dropout": dropout,
                       "max_len": max_len}
        self.d_model = d_model
        self.src_emb = nn.Embedding(src_vocab_size, d_model, padding_idx=PAD_ID)
        self.tgt_emb = nn.Embedding(tgt_vocab_size, d_model, padding_idx=PAD_ID)
        self.pos = PositionalEncoding(d_model, max_len)
        self.drop = nn.Dropout(dropout)

        def enc_layer():
            return nn.TransformerEncoderLayer(d_model, heads, ff, dropout, batch_first=True, norm_first=True)

        def dec_layer():
            return nn.TransformerDecoderLayer(d_model, heads, ff, dropout, batch_first=True, norm_first=True)

        # Built by hand rather than nn.Transformer so nested tensors can be switched off (they are not used
        # with pre-norm layers anyway, and nn.Transformer warns about it).
        self.encoder = nn.TransformerEncoder(enc_layer(), layers, nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer(), layers, nn.LayerNorm(d_model))
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():
            self.src_emb.weight[PAD_ID].zero_()
            self.tgt_emb.weight[PAD_ID].zero_()

    def _embed(self, emb: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.pos(emb(ids) * math.sqrt(self.d_model)))

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        src_pad = src == PAD_ID
        memory = self.encoder(self._embed(self.src_emb, src), src_key_padding_mask=src_pad)
        return {"memory": memory, "src_pad": src_pad, "prefix": src.new_zeros(src.size(0), 0)}

    def _decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        # No target padding mask: with the causal mask, right padding can only affect padded positions, which
        # carry no loss; leaving it out also avoids fully masked attention rows.
        return self.decoder(self._embed(self.tgt_emb, tgt_in), memory, tgt_mask=causal, tgt_is_causal=True,
                            memory_key_padding_mask=src_pad)

    def decode_step(self, y_prev: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        prefix = torch.cat([state["prefix"], y_prev.unsqueeze(1)], 1)
        out = self._decode(prefix, state["memory"], state["src_pad"])[:, -1]
        return F.log_softmax(self.generator(out).float(), -1), {**state, "prefix": prefix}

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        state = self.encode(src)
        return self.generator(self._decode(tgt_in, state["memory"], state["src_pad"]))
