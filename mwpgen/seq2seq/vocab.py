"""Word-level vocabularies and the source/target token sequences of the seq2seq baselines.

Paper, supplementary "Training Details": the seq2seq baselines see lowercased text ("to reduce the total number
of vocabulary"); input = equation + context keywords, output = the problem text. Processed texts are already
whitespace-tokenised with numbers masked as num1, num2, ... (docs/architecture.md), so a token is one
whitespace-separated word.

    source: equation symbols, "<sep>", keywords   e.g.  x = ( num1 - num2 ) <sep> joan seashells
    target: problem text                           e.g.  joan found num1 seashells . ...

Source and target get separate vocabularies (OpenNMT's default without -share_vocab), both built from the
TRAINING fold only. A word outside the vocabulary (a novel keyword at test time, a word below min_freq) maps to
<unk>: the paper's case study notes that the seq2seq baseline "converts an out-of-vocabulary word in the input
context into a special unknown token". The vocabulary is saved as JSON beside the model checkpoint.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from mwpgen.io import DataFormatError, write_json

PAD, UNK, BOS, EOS, SEP = "<pad>", "<unk>", "<bos>", "<eos>", "<sep>"
# Same ids in every vocabulary (pad 0, unk 1, bos 2, eos 3, sep 4), so models and decoders can use constants.
SPECIALS = (PAD, UNK, BOS, EOS, SEP)
PAD_ID, UNK_ID, BOS_ID, EOS_ID, SEP_ID = range(len(SPECIALS))


def tokenize(text: str) -> list[str]:
    """Lowercased whitespace tokens (the processed text is already tokenised)."""
    return text.lower().split()


def source_tokens(equation: str, keywords: Sequence[str]) -> list[str]:
    """Equation symbols + <sep> + keywords (a keyword with inner spaces becomes several tokens)."""
    return tokenize(equation) + [SEP] + [tok for kw in keywords for tok in tokenize(kw)]


def target_tokens(text: str) -> list[str]:
    return tokenize(text)


class Vocab:
    """token <-> id. Ids 0..4 are SPECIALS; then tokens by descending training frequency, ties alphabetical
    (so the same training fold always gives the same ids)."""

    def __init__(self, itos: Sequence[str]):
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}")
        self.itos = list(itos)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate token in vocabulary")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], *, min_freq: int = 1, max_size: int | None = None) -> Vocab:
        """From training-fold token lists. Tokens seen fewer than `min_freq` times are left out (-> <unk>);
        `max_size` caps the number of non-special tokens."""
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        words = sorted((w for w, c in counts.items() if c >= min_freq and w not in SPECIALS),
                       key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + words[:max_size])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(tok, UNK_ID) for tok in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens up to the first <eos>; <bos> and <pad> dropped, <unk> kept (it is what the model said)."""
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                out.append(self.itos[i])
        return out

    def to_dict(self) -> dict:
        return {"specials": list(SPECIALS), "itos": self.itos}

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(data["itos"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise DataFormatError(path, f"not a seq2seq vocabulary: {e}") from e


def build_vocabs(train_records: Sequence[dict], train_keywords: dict[str, Sequence[str]], *,
                 min_freq: int = 1) -> tuple[Vocab, Vocab]:
    """(source vocab, target vocab) from the TRAINING fold: processed records (id, text, equation) and each
    record's full keyword list (before keyword dropout, so every training keyword gets an id)."""
    src = Vocab.build((source_tokens(r["equation"], train_keywords.get(r["id"], ())) for r in train_records),
                      min_freq=min_freq)
    tgt = Vocab.build((target_tokens(r["text"]) for r in train_records), min_freq=min_freq)
    return src, tgt
