"""Tests for mwpgen.evaluation.metrics. One METEOR JVM is shared by all scoring tests (module fixture). Needs java and
pycocoevalcap; ~20 s, mostly the JVM start-up."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from mwpgen import paper as paper_results
from mwpgen.evaluation.metrics import (
    MAX_HYPOTHESIS_CHARS,
    TextScorer,
    acc_eq,
    acc_eq_subset,
    distinct_n,
    evaluate_generations,
    novelty,
    sanitize_text,
)
from mwpgen.evaluation.statistics import corpus_bleu

REFS = [
    "Joan found num1 seashells on the beach . She gave Sam some of her seashells . How many seashells did she give ?",
    "There are num1 apples in a box . Tom puts num2 more apples in the box . How many apples are in the box now ?",
    "Sara has num1 dollars . She spent num2 dollars on a toy car . How much money does Sara have left ?",
]


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """Run fn in a thread and fail (instead of hanging the suite) if it takes longer than `seconds`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test thread
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"did not finish within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(scope="module")
def scorer():
    s = TextScorer(meteor_timeout_s=90)
    s.start()
    yield s
    s.close()


def test_identical_scores_one(scorer):
    out = scorer.score(REFS, REFS, per_item=True)
    assert out["bleu4"] == pytest.approx(1.0, abs=1e-6)
    assert out["meteor"] == pytest.approx(1.0, abs=1e-6)
    assert out["rouge_l"] == 1.0
    assert out["n"] == 3 and out["rouge_l_per_item"] == [1.0, 1.0, 1.0]
    assert set(out["timings_s"]) == {"tokenize", "bleu", "rouge_l", "meteor_start", "meteor"}


def test_disjoint_scores_zero(scorer):
    out = scorer.score(["zebra quantum violin", "purple elephant yodel", "xylophone marmalade"], REFS)
    assert out["bleu4"] < 1e-6 and out["meteor"] < 0.01 and out["rouge_l"] == 0.0


def test_awkward_hypotheses_complete_and_stay_aligned(scorer):
    hyps = [
        "Joan found num1\nseashells on the beach .",
        "How many ||| apples |||| are there ?",
        "",
        "seashells " * 500,  # 5,000 characters
        "Sara\rhas num1 dollars\u2028 .\x85",
        "...",  # becomes empty after PTB punctuation removal
        REFS[0],  # identical pair last: any line misalignment would break its perfect scores
    ]
    refs = [REFS[0], REFS[1], REFS[2], REFS[0], REFS[2], REFS[1], REFS[0]]
    out = _within(60, lambda: scorer.score(hyps, refs, per_item=True))
    assert out["n"] == 7 and out["n_empty_hypotheses"] == 2 and out["n_truncated"] == 1
    for key in ("bleu4", "meteor", "rouge_l"):
        assert 0.0 <= out[key] <= 1.0
    assert out["meteor_per_item"][-1] == pytest.approx(1.0) and out["rouge_l_per_item"][-1] == 1.0
    assert out["meteor_per_item"][2] == 0.0 and out["rouge_l_per_item"][2] == 0.0
    assert out["rouge_l_per_item"][0] > 0.3  # the newline did not cut the hypothesis
    # the per-item BLEU statistics (kept for the report's bootstrap) give back pycocoevalcap's corpus BLEU-4
    assert corpus_bleu(np.sum(out["bleu_stats_per_item"], axis=0)) == pytest.approx(out["bleu4"], abs=1e-9)


def test_sanitize_text():
    assert sanitize_text("a\nb\r\nc\u2028d\x85e\tf") == "a b c d e f"
    assert sanitize_text("x ||| y||||z") == "x y |z"
    assert sanitize_text("zero\u200bwidth") == "zerowidth"
    assert sanitize_text("  plain text . ") == "plain text ."
    long = sanitize_text("seashells " * 500)
    assert len(long) <= MAX_HYPOTHESIS_CHARS and long.split() == ["seashells"] * len(long.split())
    assert sanitize_text("a" * 5000) == "a" * MAX_HYPOTHESIS_CHARS
    assert sanitize_text("b" * 5000, None) == "b" * 5000


def test_bad_inputs_rejected(scorer):
    with pytest.raises(ValueError):
        scorer.score(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        scorer.score([], [])
    with pytest.raises(ValueError):
        scorer.score(["a"], [" \n "])


def test_meteor_watchdog_turns_hang_into_error():
    s = TextScorer(meteor_timeout_s=0.01)  # the JVM cannot answer that fast
    with pytest.raises(RuntimeError, match="no answer"):
        s.score(["a b"], ["a b"])
    assert s._meteor is None  # process killed and released


def test_evaluate_generations_all_metrics(scorer):
    hyps = [REFS[0], "Tom has num1 red apples . How many apples ?", REFS[2]]
    out = evaluate_generations(  # reuses the module's JVM; the own-JVM path runs in benchmarks/bench_evaluation.py
        hyps, REFS, scorer=scorer, training_texts=[REFS[0].upper(), "unrelated"],
        predicted_equations=["x = num1 - num2", "x=num1+num2", "x = num1 - num2"],
        reference_equations=["x = num1  - num2", "x = num1 + num2", "x = num1 - num2"],
    )
    assert scorer._meteor is not None  # a passed-in scorer is left running
    assert out["acc_eq"] == pytest.approx(2 / 3)
    assert out["novelty"] == pytest.approx(2 / 3) and out["n_novel"] == 2
    assert out["acc_eq_novel"] == pytest.approx(1 / 2)
    assert 0.0 < out["dist3"] <= 1.0 and 0.0 < out["bleu4"] < 1.0
    for key in ("tokenize", "bleu", "meteor_start", "meteor", "rouge_l", "meteor_close", "acc_eq", "novelty",
                "dist_n", "total"):
        assert out["timings_s"][key] >= 0.0


def test_acc_eq():
    assert acc_eq(["x = ( num1 - num2 )", "x = num1 + num2"], ["x  = ( num1 - num2 ) ", "x = num2 + num1"]) == 0.5
    assert math.isnan(acc_eq([], []))
    with pytest.raises(ValueError):
        acc_eq(["x = num1"], [])
    pred, ref = ["x = num1", "x = num2", "x = num3"], ["x = num1", "x = num1", "x = num3"]
    assert acc_eq_subset(pred, ref, [True, True, False]) == 0.5
    assert math.isnan(acc_eq_subset(pred, ref, [False, False, False]))


def test_novelty():
    frac, mask = novelty(
        ["How many  Apples ?", "a new problem", "  seen before "], ["how many apples ?", "Seen before"]
    )
    assert mask == [False, True, False] and frac == pytest.approx(1 / 3)
    assert math.isnan(novelty([], ["x"])[0])


def test_distinct_n():
    # trigrams: "a b c"(x2), "b c a", "c a b" in text 1; "a b c", "b c d" in text 2 -> 4 distinct / 6 total
    assert distinct_n(["a b c a b c", "A B C d"], 3) == pytest.approx(4 / 6)
    assert distinct_n(["one two", ""], 3) == 0.0
    assert distinct_n([], 3) == 0.0
    assert distinct_n(["a a b"], 1) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        distinct_n(["a"], 0)


def test_paper_results_spot_values():
    assert paper_results.TABLE2["ours"]["arithmetic"]["bleu4"] == 0.338
    assert paper_results.TABLE2["seq2seq-rnn+glove"]["math23k"]["rouge_l"] == 0.507
    assert paper_results.ORACLE_ACC_EQ == {"arithmetic": 0.769, "mawps": 0.755, "math23k": 0.672}
    assert paper_results.TABLE3_PERCENT_NOVEL["seq2seq-tf"]["math23k"] == 38.88
    assert paper_results.TABLE4["full model"]["math23k"] == {"bleu4": 0.332, "acc_eq": 0.513}
    for table in (paper_results.TABLE2, paper_results.TABLE4):
        assert all(set(row) == set(paper_results.DATASETS) for row in table.values())


def test_acc_eq_exact_in_the_canonical_form_and_equivalent():
    from mwpgen.evaluation.metrics import acc_eq

    predicted = ["x = num1 + num2", "x = num2 + num1", "x = num1 - num2", "garbage"]
    reference = ["x = ( num1 + num2 )"] * 2 + ["x = num2 - num1", "x = num1"]
    assert acc_eq(predicted, reference) == 0.25  # only the first: redundant parentheses are not significant
    assert acc_eq(predicted, reference, equivalent_too=True) == 0.5  # num2 + num1 is the same equation
