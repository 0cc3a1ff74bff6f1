"""Context keyword selection q_Psi(M) (paper Section 2.2, Eq. 5) and its VAE pieces (Eq. 6).

Pipeline for one MWP (a processed text: whitespace words, numbers masked as num1, num2, ...):

1. `tokenize_words` encodes " " + text exactly like the generator's target (prompts.py) and maps every
   token back to its whitespace word through the tokenizer's character offsets.
2. `ContextSelector` embeds the tokens with a FROZEN copy of the pre-trained generator's input
   embedding matrix (supplementary "Training Details": fixed for stability), contextualises them
   with parameter-free linear self-attention and scores each token with sigmoid(w^T m~_t + b):
   Psi = {w, b} only.
3. `sample_straight_through` draws c ~ Bernoulli(q) (forward: hard 0/1; backward: dc/dq = 1).
4. `inputs.slot_embeddings` turns c into the generator's context: the slot holds every candidate word's
   tokens, each token embedding multiplied by its word's c. Forward, unselected words are zero vectors; backward,
   dL_LM/dc = <dL_LM/de, token embedding> for every candidate, and the straight-through c passes it to q and Psi.
5. `bernoulli_kl` is L_c = KL(q_Psi || Bernoulli(rho)), summed over the candidate words.

Sub-word tokens -> words. A word's selection decision lives on its FIRST sub-token (the "head"):
q(word) = q(head), one Bernoulli c per word, and every sub-token of the word in the context slot is
gated by that one c. Why the first sub-token: with byte-level BPE (GPT-2, SmolLM2) it is the token
carrying the word boundary (the leading space) and the word's start; one decision per word keeps
L_c a sum of per-word Bernoulli KLs like the paper's bag-of-words c; it is the same rule at training
and inference; and for words that are one token (word-level tokenizers, most GPT-2 words) it is
exactly Eq. 5. (max over sub-tokens would bias long words towards selection and route gradient to
an arbitrary piece.) Since m~_t depends only on m_t and M (no positions), repeated words get equal
q: only the FIRST occurrence of each word is a candidate, so c is indexed by vocabulary entries
as in the paper, never twice per word.

Candidates: `keywords.is_candidate` on the whitespace word (no stopwords, punctuation, num tokens);
this realises the indicator 1{V_i in M} of Eq. 5 plus the paper's stopword/punctuation masking.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn

from mwpgen.data.keywords import is_candidate


@dataclass(frozen=True)
class WordTokens:
    """One MWP tokenised for the selector and the generator (ids are the generator's target tokens)."""

    ids: list[int]  # tokens of " " + text, no special tokens (prompts.py's target encoding)
    word_of: list[int]  # whitespace-word index of each token (-1: a token with no visible character)
    words: list[str]  # the whitespace words of text
    heads: list[tuple[int, int]]  # [start, end) token span of each candidate word's first occurrence

    @property
    def candidate(self) -> list[bool]:
        """Per token: True on the head (first sub-token) of a candidate word's first occurrence."""
        mask = [False] * len(self.ids)
        for start, _ in self.heads:
            mask[start] = True
        return mask


def tokenize_words(tokenizer, text: str, max_tokens: int | None = None) -> WordTokens:
    """Encode " " + text (needs a fast tokenizer for offsets) and find the candidate words' spans."""
    s = " " + text
    enc = tokenizer(s, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
    if max_tokens is not None:
        ids, offsets = ids[:max_tokens], offsets[:max_tokens]
    words, char_word = [], [-1] * len(s)
    for k, m in enumerate(re.finditer(r"\S+", s)):
        words.append(m.group())
        char_word[m.start() : m.end()] = [k] * (m.end() - m.start())
    # A token belongs to the word of its first non-space character (offsets may include the space).
    word_of = [next((char_word[i] for i in range(a, b) if char_word[i] >= 0), -1) for a, b in offsets]
    heads, seen, t = [], set(), 0
    while t < len(ids):
        end = t + 1
        while end < len(ids) and word_of[end] == word_of[t]:
            end += 1
        w = word_of[t]
        if w >= 0 and is_candidate(words[w]) and words[w] not in seen:
            seen.add(words[w])
            heads.append((t, end))
        t = end
    return WordTokens(ids, word_of, words, heads)


def selector_batch(items: Sequence[WordTokens], pad_id: int, device=None) -> dict[str, torch.Tensor]:
    """Right-padded ids [B, T], valid-token mask [B, T] and candidate-head mask [B, T]."""
    width = max(1, max(len(it.ids) for it in items))
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.bool)
    cand = torch.zeros((len(items), width), dtype=torch.bool)
    for i, it in enumerate(items):
        ids[i, : len(it.ids)] = torch.tensor(it.ids, dtype=torch.long)
        mask[i, : len(it.ids)] = True
        cand[i, : len(it.ids)] = torch.tensor(it.candidate, dtype=torch.bool)
    return {"ids": ids.to(device), "mask": mask.to(device), "candidate": cand.to(device)}


SELECTOR_FORMS = ("eq5", "residual")


class ContextSelector(nn.Module):
    """q_Psi(M): probability that each candidate token (word head) of M is a context keyword.

    form "eq5": Eq. 5 as the paper writes it, sigma(w^T m~_t + b), with nn.Linear's default initialisation.
    form "residual" (this project's default; departures named in README.md): sigma(w^T (m_t + m~_t) + b), the
    word's own embedding added to its context, with w = 0 and b = logit(prior) at initialisation. Measured on
    SmolLM2's embeddings, Eq. 5's parameter-free self-attention is nearly uniform (a word's weight on itself
    0.038 against 0.032 uniform), so m~_t is almost the same vector for every word of a problem and Eq. 5 can
    only select all of a problem's words or none; starting at the prior means every pick is learned.
    """

    def __init__(self, embeddings: torch.Tensor, form: str = "eq5", prior: float | None = None):
        super().__init__()
        if form not in SELECTOR_FORMS:
            raise ValueError(f"selector form must be one of {SELECTOR_FORMS}, got {form!r}")
        # Frozen copy of the PRE-TRAINED input embeddings [V, D]: a buffer, not a parameter, so it is
        # never trained and does not follow the generator's fine-tuned embeddings.
        self.register_buffer("embeddings", embeddings.detach().clone().float())
        self.form = form
        self.proj = nn.Linear(embeddings.shape[1], 1)  # w, b: all of Psi
        if form == "residual":
            with torch.no_grad():
                self.proj.weight.zero_()
                self.proj.bias.fill_(math.log(prior / (1 - prior)) if prior is not None else 0.0)

    @classmethod
    def from_model(cls, model, form: str = "eq5", prior: float | None = None) -> ContextSelector:
        return cls(model.get_input_embeddings().weight, form, prior)

    def features(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What w reads at each token [B, T, D]: m~_t (eq5) or m_t + m~_t (residual). Parameter-free."""
        m = self.embeddings[ids]  # [B, T, D], rows m_t of M^T
        d = m.shape[-1]
        scores = m @ m.transpose(1, 2) / math.sqrt(d)  # [B, T(query t), T(key)] = M^T m_t / sqrt(D)
        scores = scores.masked_fill(~mask[:, None, :], float("-inf"))  # padding is not part of M
        a = scores.softmax(dim=-1)  # a_t
        m_tilde = a @ m  # m~_t = M a_t
        return m_tilde if self.form == "eq5" else m + m_tilde

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, candidate: torch.Tensor) -> torch.Tensor:
        q = torch.sigmoid(self.proj(self.features(ids, mask)).squeeze(-1))  # Eq. 5: sigma(w^T m~_t + b)
        return q * candidate.to(q.dtype)  # Eq. 5's indicator, plus stopword/punct/num masking


def fit_to_keywords(selector: ContextSelector, items: Sequence[WordTokens], keywords: Sequence[Sequence[str]],
                    steps: int = 300, lr: float = 0.05) -> dict:
    """Warm start (train.ours.selector_init = keywords): fit Psi = (w, b) so that q > 0.5 picks each problem's
    keywords (the keywords stage's TF-IDF picks), by full-batch logistic regression over the candidate words.
    The features are parameter-free (`features`), so they are computed once. Deterministic (no sampling).
    Returns the fit's final loss and how many candidate words it classifies as the keywords do."""
    x, y = [], []
    with torch.no_grad():
        for start in range(0, len(items), 64):
            chunk = items[start : start + 64]
            sel = selector_batch(chunk, 0, selector.embeddings.device)
            feats = selector.features(sel["ids"], sel["mask"])
            for i, (it, kws) in enumerate(zip(chunk, keywords[start : start + 64])):
                wanted = set(kws)
                for head, _ in it.heads:
                    x.append(feats[i, head])
                    y.append(float(it.words[it.word_of[head]] in wanted))
    if not x:
        raise ValueError("fit_to_keywords: the problems have no candidate words")
    x, y = torch.stack(x), torch.tensor(y, device=selector.embeddings.device)
    opt = torch.optim.Adam(selector.proj.parameters(), lr=lr)
    for _ in range(steps):
        loss = nn.functional.binary_cross_entropy_with_logits(selector.proj(x).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        agree = float(((selector.proj(x).squeeze(-1) > 0).float() == y).float().mean())
    return {"loss": float(loss.detach()), "agreement": agree, "candidates": len(y), "keyword_share": float(y.mean())}


def sample_straight_through(q: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """c ~ Bernoulli(q) with the straight-through estimator (Bengio et al. 2013), as Section 2.2 says:
    the forward value is the hard 0/1 sample, the backward pass treats dc/dq as 1."""
    hard = torch.bernoulli(q.detach(), generator=generator)
    return hard + (q - q.detach())  # q - q.detach() is exactly 0: the forward value is exactly 0/1


def bernoulli_kl(q: torch.Tensor, rho: float, candidate: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """L_c = sum over candidate words of KL(Bernoulli(q) || Bernoulli(rho)) (Eq. 6), per example [B]:
        q log(q / rho) + (1 - q) log((1 - q) / (1 - rho))."""
    if not 0.0 < rho < 1.0:
        raise ValueError(f"rho must be in (0, 1), got {rho}")
    q = q.clamp(eps, 1.0 - eps)
    kl = q * torch.log(q / rho) + (1.0 - q) * torch.log((1.0 - q) / (1.0 - rho))
    return (kl * candidate.to(kl.dtype)).sum(dim=-1)


def selected_words(tokens: WordTokens, q: Sequence[float] | torch.Tensor, threshold: float = 0.5) -> list[str]:
    """Inference: the words whose head has q > threshold, in order of first appearance."""
    q = q.tolist() if isinstance(q, torch.Tensor) else list(q)
    return [tokens.words[tokens.word_of[start]] for start, _ in tokens.heads if q[start] > threshold]
