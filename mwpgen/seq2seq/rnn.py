"""LSTM encoder-decoder ("seq2seq-rnn" of the supplementary Table "Model configurations").

The paper ran these in OpenNMT-py; this is a plain-PyTorch equivalent of OpenNMT's default RNN model:
unidirectional LSTM encoder, LSTM decoder initialised with the encoder's final (h, c), Luong "general" global
attention with input feeding, dropout on embeddings / between layers / on decoder outputs, uniform(-0.1, 0.1)
parameter init (OpenNMT's -param_init 0.1).

Attention. The paper's text says seq2seq-rnn is "a seq2seq model using LSTMs with attention" (the base
architecture of Zhou & Huang 2019), while the configuration table lists "seq2seq-rnn" (2 layers) and
"seq2seq-attn-rnn" (1 layer). Only one RNN row appears in the results, called seq2seq-rnn and described as
attentional, and OpenNMT-py's default (-global_attention general) gives a 2-layer RNN attention unless it is
switched off. So the default here is 2 layers WITH attention; `attention=None` gives the attention-free
reading, and `layers` is a constructor argument (see train.MODEL_PRESETS).

Decoding interface shared with transformer.py (used by decode.py): `encode(src) -> state`,
`decode_step(y_prev, state) -> (log_probs, state)`, where every tensor in `state` is batch-first so a decoder
can reorder beams with `index_select(0, ...)`; `forward(src, tgt_in) -> logits` is teacher forcing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .vocab import PAD_ID

ATTENTION_TYPES = ("general", "dot", None)


class Seq2SeqRNN(nn.Module):
    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, emb_dim: int = 300, hidden: int = 512,
                 layers: int = 2, attention: str | None = "general", dropout: float = 0.3, param_init: float = 0.1):
        super().__init__()
        if attention not in ATTENTION_TYPES:
            raise ValueError(f"attention must be one of {ATTENTION_TYPES}, got {attention!r}")
        # Everything needed to rebuild the module (saved as config.json beside the weights).
        self.config = {"kind": "rnn", "src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size,
                       "emb_dim": emb_dim, "hidden": hidden, "layers": layers, "attention": attention,
                       "dropout": dropout, "param_init": param_init}
        self.attention = attention
        self.hidden = hidden
        self.src_emb = nn.Embedding(src_vocab_size, emb_dim, padding_idx=PAD_ID)
        self.tgt_emb = nn.Embedding(tgt_vocab_size, emb_dim, padding_idx=PAD_ID)
        between = dropout if layers > 1 else 0.0  # nn.LSTM only applies dropout between stacked layers
        self.encoder = nn.LSTM(emb_dim, hidden, layers, batch_first=True, dropout=between)
        # Input feeding (Luong et al. 2015): the previous attentional output is concatenated to the next input,
        # so the decoder knows what it attended to. Without attention there is nothing to feed.
        feed = hidden if attention else 0
        self.decoder = nn.LSTM(emb_dim + feed, hidden, layers, batch_first=True, dropout=between)
        if attention == "general":
            self.attn_in = nn.Linear(hidden, hidden, bias=False)  # score(h, m) = h^T W_a m
        if attention:
            self.attn_out = nn.Linear(2 * hidden, hidden, bias=False)  # tanh(W_c [context; h])
        self.drop = nn.Dropout(dropout)
        self.generator = nn.Linear(hidden, tgt_vocab_size)
        if param_init > 0:
            for p in self.parameters():
                nn.init.uniform_(p, -param_init, param_init)
        with torch.no_grad():  # <pad> embeds to zero, as nn.Embedding(padding_idx) would have it
            self.src_emb.weight[PAD_ID].zero_()
            self.tgt_emb.weight[PAD_ID].zero_()

    def init_embeddings(self, src: torch.Tensor | None = None, tgt: torch.Tensor | None = None) -> None:
        """Copy pre-trained vectors (e.g. GloVe rows from mwpgen.seq2seq.glove.embedding_matrix) into the embeddings.
        They stay trainable, like OpenNMT's -pre_word_vecs_enc/-dec without -fix_word_vecs."""
        with torch.no_grad():
            for emb, matrix in ((self.src_emb, src), (self.tgt_emb, tgt)):
                if matrix is not None:
                    if tuple(matrix.shape) != tuple(emb.weight.shape):
                        raise ValueError(f"embedding matrix {tuple(matrix.shape)} != {tuple(emb.weight.shape)}")
                    emb.weight.copy_(torch.as_tensor(matrix, dtype=emb.weight.dtype))
                    emb.weight[PAD_ID].zero_()

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """src: (B, S) right-padded ids -> decoder state (all tensors batch-first)."""
        mask = src != PAD_ID
        lengths = mask.sum(1).clamp(min=1)  # packing rejects length 0 (sources always hold "<sep>" anyway)
        packed = pack_padded_sequence(self.drop(self.src_emb(src)), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, (h, c) = self.encoder(packed)  # h, c: final states at each sequence's true last position
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        return {"memory": memory, "src_mask": mask, "h": h.transpose(0, 1), "c": c.transpose(0, 1),
                "feed": memory.new_zeros(src.size(0), self.hidden)}

    def _attend(self, h: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Luong global attention for one step. h: (B, H); memory: (B, S, H); mask: (B, S) True = real token."""
        query = self.attn_in(h) if self.attention == "general" else h
        scores = torch.bmm(memory, query.unsqueeze(2)).squeeze(2).masked_fill(~mask, float("-inf"))
        context = torch.bmm(scores.softmax(-1).unsqueeze(1), memory).squeeze(1)
        return torch.tanh(self.attn_out(torch.cat([context, h], -1)))

    def _step(self, y_prev: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        emb = self.drop(self.tgt_emb(y_prev))
        inp = torch.cat([emb, state["feed"]], -1) if self.attention else emb
        hc = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.decoder(inp.unsqueeze(1), hc)
        out = out.squeeze(1)
        if self.attention:
            out = self._attend(out, state["memory"], state["src_mask"])
        out = self.drop(out)
        return out, {**state, "h": h.transpose(0, 1), "c": c.transpose(0, 1), "feed": out}

    def decode_step(self, y_prev: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """y_prev: (B,) previous tokens -> (log-probs (B, V) of the next token, new state)."""
        out, state = self._step(y_prev, state)
        return F.log_softmax(self.generator(out).float(), -1), state

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: tgt_in (B, T) = <bos> + target -> logits (B, T, V)."""
        state = self.encode(src)
        if not self.attention:  # no input feeding: one cuDNN call over the whole target
            hc = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
            out, _ = self.decoder(self.drop(self.tgt_emb(tgt_in)), hc)
            return self.generator(self.drop(out))
        outs = []
        for t in range(tgt_in.size(1)):  # input feeding makes step t depend on step t-1's output
            out, state = self._step(tgt_in[:, t], state)
            outs.append(out)
        return self.generator(torch.stack(outs, 1))
