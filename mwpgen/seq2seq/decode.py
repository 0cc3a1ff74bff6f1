"""Greedy and beam-search decoding for both seq2seq models (anything with `encode` / `decode_step`, see rnn.py).

Both are batched over examples. A hypothesis' model score is the sum of its token log-probs, <eos> included
when it ended; beam search ranks finished hypotheses by the length-normalised score  logprob / length^alpha
(length counts the <eos>; alpha = 0: raw sum, alpha = 1: mean log-prob per token), which keeps it from
preferring short outputs. Beam details:
- each step takes the 2k best (beam, token) continuations (all of one length, so raw and normalised scores
  rank them alike); an <eos> among the first k finishes a hypothesis, the first k non-<eos> ones stay alive;
- an example is done when its best continuation is <eos> (OpenNMT's rule: the top beam has finished); at
  `max_len` the alive hypotheses are added unfinished. (Stopping at k finished hypotheses, fairseq's rule, was
  tried and rejected: short low-probability endings filled the k slots before the top beam ended.)
- the best finished-or-cut hypothesis by normalised score is returned.
With k = 1 this is exactly greedy decoding. (OpenNMT's default is beam 5 without length penalty; pass
alpha=0 for that.)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from .checkpoint import load_checkpoint
from .not_run import read_not_run
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab, source_tokens


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without <bos> / <eos>
    logprob: float  # sum of log-probs of tokens (+ <eos> when finished)
    finished: bool  # False: cut at max_len without <eos>

    @property
    def length(self) -> int:
        return len(self.tokens) + int(self.finished)

    def score(self, alpha: float = 1.0) -> float:
        return self.logprob / max(1, self.length) ** alpha


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Decode without dropout, then restore the caller's mode (decoding mid-training must not stop training)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def pad_batch(seqs: Sequence[Sequence[int]], device: torch.device | str = "cpu") -> torch.Tensor:
    """Right-pad id lists into a (B, max_len) LongTensor."""
    width = max(1, max((len(s) for s in seqs), default=1))
    out = torch.full((len(seqs), width), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out.to(device)


def select_state(state: dict[str, torch.Tensor], index: torch.Tensor) -> dict[str, torch.Tensor]:
    """Reorder / repeat the batch rows of a decoder state (all its tensors are batch-first)."""
    return {k: v.index_select(0, index) for k, v in state.items()}


def greedy_decode(model: torch.nn.Module, src: torch.Tensor, *, max_len: int = 100) -> list[Hypothesis]:
    """Argmax token at every step for a batch of sources (B, S); stops at <eos> or after max_len tokens."""
    with eval_mode(model):
        state = model.encode(src)
        batch = src.size(0)
        y = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
        alive = torch.ones(batch, dtype=torch.bool, device=src.device)
        logprob = torch.zeros(batch, device=src.device)
        steps = []
        for _ in range(max_len):
            logp, state = model.decode_step(y, state)
            best, y = logp.max(-1)
            logprob += torch.where(alive, best, torch.zeros_like(best))
            steps.append(torch.where(alive, y, torch.full_like(y, PAD_ID)))
            alive &= y != EOS_ID
            if not alive.any():
                break
        ids = torch.stack(steps, 1).tolist() if steps else [[] for _ in range(batch)]
    hyps = []
    for row, lp in zip(ids, logprob.tolist()):
        finished = EOS_ID in row
        tokens = row[: row.index(EOS_ID)] if finished else row
        hyps.append(Hypothesis(tokens, lp, finished))
    return hyps


def beam_search(model: torch.nn.Module, src: torch.Tensor, *, beam_size: int = 5, max_len: int = 100,
                alpha: float = 1.0) -> list[Hypothesis]:
    """Best hypothesis per source by length-normalised score (module docstring for the details)."""
    if beam_size < 1:
        raise ValueError("beam_size must be >= 1")
    k = beam_size
    with eval_mode(model):
        batch, device = src.size(0), src.device
        state = select_state(model.encode(src), torch.arange(batch, device=device).repeat_interleave(k))
        # Only beam 0 is live at first, so the k copies of the source do not yield k identical hypotheses.
        scores = torch.full((batch, k), float("-inf"), device=device)
        scores[:, 0] = 0.0
        prefixes = torch.zeros(batch * k, 0, dtype=torch.long, device=device)
        y = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
        finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        done = [False] * batch
        for _ in range(max_len):
            logp, state = model.decode_step(y, state)
            vocab = logp.size(-1)
            cand = (scores.reshape(-1, 1) + logp).reshape(batch, k * vocab)
            top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=1)
            top_scores, top_beam, top_tok = top_scores.tolist(), (top_idx // vocab).tolist(), (top_idx % vocab).tolist()
            new_scores = [[float("-inf")] * k for _ in range(batch)]
            new_beam = [[0] * k for _ in range(batch)]
            new_tok = [[PAD_ID] * k for _ in range(batch)]
            prefix_rows: list[list[int]] | None = None  # fetched from the device only when something finishes
            for b in range(batch):
                if done[b]:
                    continue
                n_alive = 0
                for rank, (s, beam, tok) in enumerate(zip(top_scores[b], top_beam[b], top_tok[b])):
                    if s == float("-inf") or n_alive == k:
                        break
                    if tok == EOS_ID:
                        if rank < k:
                            prefix_rows = prefix_rows if prefix_rows is not None else prefixes.tolist()
                            finished[b].append(Hypothesis(prefix_rows[b * k + beam], s, True))
                    else:
                        new_scores[b][n_alive], new_beam[b][n_alive], new_tok[b][n_alive] = s, beam, tok
                        n_alive += 1
                if top_tok[b][0] == EOS_ID or n_alive == 0:
                    done[b] = True
                    new_scores[b] = [float("-inf")] * k  # stop its beams from producing candidates
            if all(done):
                break
            flat = (torch.arange(batch).unsqueeze(1) * k + torch.tensor(new_beam)).reshape(-1).to(device)
            state = select_state(state, flat)
            y = torch.tensor(new_tok, dtype=torch.long, device=device).reshape(-1)
            prefixes = torch.cat([prefixes.index_select(0, flat), y.unsqueeze(1)], 1)
            scores = torch.tensor(new_scores, device=device)
        else:  # max_len reached: alive hypotheses are cut, not finished
            rows, flat_scores = prefixes.tolist(), scores.reshape(-1).tolist()
            for b in range(batch):
                if not done[b]:
                    finished[b].extend(Hypothesis(rows[b * k + j], flat_scores[b * k + j], False)
                                       for j in range(k) if flat_scores[b * k + j] != float("-inf"))
    # (An empty list is only possible with a vocabulary of little more than <eos>; return an empty cut hypothesis.)
    return [max(hyps, key=lambda h: h.score(alpha)) if hyps else Hypothesis([], float("-inf"), False)
            for hyps in finished]


def sequence_logprob(model: torch.nn.Module, src: torch.Tensor, targets: Sequence[Sequence[int]]) -> list[float]:
    """Model log-prob of each target (ids without <bos>/<eos>) given its source, <eos> included: the score a
    finished Hypothesis with those tokens would have."""
    with eval_mode(model):
        tgt_in = pad_batch([[BOS_ID, *t] for t in targets], src.device)
        tgt_out = pad_batch([[*t, EOS_ID] for t in targets], src.device)
        logp = torch.log_softmax(model(src, tgt_in).float(), -1)
        token_lp = logp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1).masked_fill(tgt_out == PAD_ID, 0.0)
        return token_lp.sum(1).tolist()


def decode_problems(model: torch.nn.Module, src_vocab: Vocab, tgt_vocab: Vocab, sources: Sequence[Sequence[str]], *,
             beam_size: int = 1, max_len: int = 100, alpha: float = 1.0, batch_size: int = 64,
             device: torch.device | str | None = None) -> list[str]:
    """Source token lists (vocab.source_tokens) -> generated problem texts (space-joined tokens; <unk> kept).
    beam_size 1 uses batched greedy decoding."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    texts: list[str] = []
    for start in range(0, len(sources), batch_size):
        src = pad_batch([src_vocab.encode(s) for s in sources[start : start + batch_size]], device)
        if beam_size == 1:
            hyps = greedy_decode(model, src, max_len=max_len)
        else:
            hyps = beam_search(model, src, beam_size=beam_size, max_len=max_len, alpha=alpha)
        texts.extend(" ".join(tgt_vocab.decode(h.tokens)) for h in hyps)
    return texts


def generate_baseline(checkpoint_dir: str | os.PathLike, equations: Sequence[str],
                      keywords_lists: Sequence[Sequence[str]], decoding: str, num_beams: int, max_len: int,
                      device: str | torch.device, *, alpha: float = 1.0, batch_size: int = 64) -> list[str]:
    """One problem text per (equation, keywords), from a train_baseline checkpoint. decoding "greedy" or "beam"
    (`num_beams` wide; length-normalised by logprob / length^alpha, see decode.py). Keywords outside the
    training vocabulary become <unk>, as in the paper's seq2seq baseline."""
    if decoding not in ("greedy", "beam"):
        raise ValueError(f"decoding must be 'greedy' or 'beam', got {decoding!r}")
    if len(equations) != len(keywords_lists):
        raise ValueError(f"{len(equations)} equations but {len(keywords_lists)} keyword lists")
    reason = read_not_run(checkpoint_dir)
    if reason is not None:
        raise RuntimeError(f"{checkpoint_dir} was not trained: {reason}")
    model, src_vocab, tgt_vocab = load_checkpoint(checkpoint_dir, device)
    sources = [source_tokens(eq, kws) for eq, kws in zip(equations, keywords_lists)]
    return decode_problems(model, src_vocab, tgt_vocab, sources, beam_size=num_beams if decoding == "beam" else 1,
                           max_len=max_len, alpha=alpha, batch_size=batch_size, device=device)
