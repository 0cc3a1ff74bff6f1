"""Paired bootstrap against GPT-pre: corpus BLEU-4 from per-problem statistics equals pycocoevalcap's, intervals are
seeded, zero for a copy of GPT-pre and above zero for a clearly better model; Tables 2/4 and report.json carry
them. No JVM: the sentences are already PTB-tokenised (lowercase, no punctuation), as metrics.TextScorer makes them."""

from __future__ import annotations

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu

from mwpgen.evaluation.metrics import bleu_stats
from mwpgen.evaluation.statistics import (
    ablation_runs,
    ablation_summary,
    corpus_bleu,
    deltas_vs_gpt_pre,
    paired_bootstrap,
    summary,
)
from mwpgen.evaluation.tables import TABLE2_MODELS, table2, table4
from mwpgen.ours.ablation import TABLE4_ROWS, table4_rows, variant_of

REFS = [
    "joan found num1 seashells on the beach she gave sam some of her seashells how many seashells did she give",
    "there are num1 apples in a box tom puts num2 more apples in the box how many apples are in the box now",
    "sara has num1 dollars she spent num2 dollars on a toy car how much money does sara have left",
    "a baker made num1 cakes he sold num2 of them how many cakes does he have left",
]
HYPS = [
    REFS[0],  # identical
    "there are num1 apples in the box tom puts num2 apples in it how many apples are there now",  # partial overlap
    "sara has num1 dollars",  # short: brevity penalty
    "",  # empty hypothesis (as after PTB on punctuation only)
]


def _pyco_bleu4(hyps: list[str], refs: list[str]) -> float:
    score, _ = Bleu(4).compute_score({i: [r] for i, r in enumerate(refs)}, {i: [h] for i, h in enumerate(hyps)},
                                     verbose=0)
    return score[3]


def test_corpus_bleu_from_statistics_equals_pycocoevalcap():
    stats = np.array([bleu_stats(h, [r]) for h, r in zip(HYPS, REFS)])
    assert corpus_bleu(stats.sum(axis=0)) == pytest.approx(_pyco_bleu4(HYPS, REFS), abs=1e-9)
    # a bootstrap resample (problems drawn with replacement) is the corpus with those problems repeated
    idx = [1, 1, 2, 0, 3, 1]
    assert corpus_bleu(stats[idx].sum(axis=0)) == pytest.approx(
        _pyco_bleu4([HYPS[i] for i in idx], [REFS[i] for i in idx]), abs=1e-9)
    # without brevity penalty and with every n-gram order matched
    assert corpus_bleu(stats[:2].sum(axis=0)) == pytest.approx(_pyco_bleu4(HYPS[:2], REFS[:2]), abs=1e-9)


def _records(n: int, good: bool, seed: int) -> list[dict]:
    """n problems: a perfect model (good) reproduces the reference and its equation; a poor one 30% of the time."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ref = REFS[i % len(REFS)]
        hit = good or rng.random() < 0.3
        hyp = ref if good else " ".join(w for w in ref.split() if rng.random() < 0.6)
        out.append({"id": f"p{i}", "bleu_stats": bleu_stats(hyp, [ref]), "acc_eq": hit,
                    "acc_eq_equivalent": hit or rng.random() < 0.2, "judged": hit and (good or rng.random() < 0.5)})
    return out


def test_paired_bootstrap_is_seeded_zero_for_a_copy_and_positive_for_a_better_model():
    base = [_records(40, False, seed=k) for k in range(2)]  # two folds
    better = [_records(40, True, seed=k) for k in range(2)]
    same = paired_bootstrap(list(zip(base, base)), seed=2021)
    for metric in ("bleu4", "acc_eq", "acc_eq_equivalent", "consistency_judged"):
        assert same[metric] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    a = paired_bootstrap(list(zip(better, base)), seed=2021)
    assert a == paired_bootstrap(list(zip(better, base)), seed=2021)  # same seed, same intervals
    assert a != paired_bootstrap(list(zip(better, base)), seed=7)
    for metric in ("bleu4", "acc_eq", "acc_eq_equivalent", "consistency_judged"):
        assert 0 < a[metric]["low"] < a[metric]["mean"] < a[metric]["high"]
    assert a["n"] == 80 and a["unpaired"] == 0
    # the mean over folds of the per-fold differences
    acc = [np.mean([r["acc_eq"] for r in b]) - np.mean([r["acc_eq"] for r in g]) for g, b in zip(better, base)]
    assert a["acc_eq"]["mean"] == pytest.approx(-np.mean(acc))
    judged = [np.mean([r["judged"] for r in b]) - np.mean([r["judged"] for r in g]) for g, b in zip(better, base)]
    assert a["consistency_judged"]["mean"] == pytest.approx(-np.mean(judged))


def test_missing_problems_are_compared_on_the_intersection():
    base, model = _records(30, False, seed=1), _records(30, True, seed=1)
    out = paired_bootstrap([(model[5:], base)], seed=0)
    assert out["n"] == 25 and out["unpaired"] == 5
    assert out == paired_bootstrap([(model[5:], base[5:])], seed=0) | {"unpaired": 5}
    assert paired_bootstrap([([], base)], seed=0) is None  # e.g. a model that was not run


def _score(model, bleu, acc, fold=0, dataset="arithmetic"):
    return {"model": model, "dataset": dataset, "fold": fold, "bleu4": bleu, "meteor": 0.2, "rouge_l": 0.3,
            "acc_eq": acc, "acc_eq_equivalent": acc + 0.05, "consistency_judged": acc - 0.1, "novelty": 0.5,
            "acc_eq_novel": 0.1, "dist3": 0.7}


ORACLE = [
    {
        "model": "evaluator",
        "dataset": "arithmetic",
        "fold": 0,
        "oracle_acc_eq": 0.7,
        "oracle_acc_eq_equivalent": 0.75,
        "chance_acc_eq": 0.12,
        "chance_acc_eq_equivalent": 0.14,
        "chance_equation": "x = num1 + num2",
    }
]


def test_table2_and_report_json_carry_equivalent_accuracy_chance_and_intervals():
    predictions = {("gpt_pre", "arithmetic", 0): _records(40, False, seed=3),
                   ("ours", "arithmetic", 0): _records(40, True, seed=3)}
    deltas = deltas_vs_gpt_pre(predictions, seed=2021)
    assert set(deltas) == {("ours", "arithmetic")}
    scores = [_score("gpt_pre", 0.3, 0.4), _score("ours", 0.9, 0.95)]
    judge = {"judge": "parse = E and surface checks", "dataset": "arithmetic", "fold": 0, "n": 656,
             "test": {"n": 300, "consistent": 44,
                      "judge": {"precision": 0.403, "recall": 0.659, "precision_ci": [0.3, 0.5], "recall_ci": None},
                      "acc_eq": {"precision": 0.369, "recall": 0.705, "precision_ci": None, "recall_ci": None}}}
    t = table2(scores, ORACLE, TABLE2_MODELS, ["arithmetic"], deltas, judge, base_model="smollm2-135m")
    main, delta = t.tables
    rows = main.cells()
    assert rows["mwp2eq on the reference problems (oracle)"]["ACC-eq"] == "0.700"
    assert rows["mwp2eq on the reference problems (oracle)"]["ACC-eq (equivalent)"] == "0.750"
    assert rows["chance: most frequent training equation"]["ACC-eq"] == "0.120"
    assert rows["chance: most frequent training equation"]["BLEU-4"] == ""
    assert any("`x = num1 + num2` (fold 0)" in n for n in t.notes)
    # what the judged column is worth
    assert any("precision is 0.403 [0.30, 0.50] and its recall 0.659 (" in n for n in t.notes)
    ours = rows["ours (SmolLM2-135M)"]
    assert [ours[c] for c in ("ACC-eq", "ACC-eq (equivalent)", "consistency (judged)")] == ["0.950", "1.000", "0.850"]
    assert [ours[c] for c in ("BLEU-4 (paper)", "METEOR (paper)", "ROUGE-L (paper)", "ACC-eq (paper)")] == \
        ["0.338", "0.322", "0.567", "0.453"]
    differences = delta.cells()
    assert list(differences) == ["ours (SmolLM2-135M)"]  # GPT-pre is the baseline, not a row
    d = deltas[("ours", "arithmetic")]["bleu4"]
    assert differences["ours (SmolLM2-135M)"]["Δ BLEU-4"] == f"+{d['mean']:.3f} [+{d['low']:.3f}, +{d['high']:.3f}]"
    assert d["low"] > 0
    assert differences["ours (SmolLM2-135M)"]["Δ consistency (judged)"].startswith("+")  # its interval too
    assert r"$\Delta$ BLEU-4" in t.latex() and "Δ ACC-eq (equivalent)" in t.markdown()

    report = summary(scores, ORACLE, deltas)
    assert report["ours"]["arithmetic"]["acc_eq_equivalent"] == 1.0
    assert report["ours"]["arithmetic"]["consistency_judged"] == 0.85
    assert set(report["ours"]["arithmetic"]["delta_vs_gpt_pre"]) == {"bleu4", "acc_eq", "acc_eq_equivalent",
                                                                     "consistency_judged", "n", "unpaired"}
    assert set(report["ours"]["arithmetic"]["delta_vs_gpt_pre"]["bleu4"]) == {"mean", "low", "high"}
    assert report["evaluator"]["arithmetic"] == {"oracle_acc_eq": 0.7, "oracle_acc_eq_equivalent": 0.75}
    assert report["chance"]["arithmetic"] == {"acc_eq": 0.12, "acc_eq_equivalent": 0.14}
    assert "delta_vs_gpt_pre" not in report["gpt_pre"]["arithmetic"]


def test_table4_rows_carry_their_interval_against_the_full_model_and_report_json_carries_them():
    predictions = {("ours", "arithmetic", 0): _records(30, False, seed=4),
                   ("ours-eq_softmax", "arithmetic", 0): _records(30, True, seed=4),
                   ("gpt_pre", "arithmetic", 0): _records(30, False, seed=5)}
    scores = [_score("ours", 0.3, 0.4), _score("ours-eq_softmax", 0.9, 0.95), _score("gpt_pre", 0.2, 0.3)]
    runs = ablation_runs(scores, variant_of, table4_rows, ["arithmetic"], [0], predictions, seed=2021)
    t = table4(runs, TABLE4_ROWS, ["arithmetic"], base_model="smollm2-135m")
    differences = t.table("Table 4 (arithmetic): difference").cells()
    softmax = differences["L_eq (softmax)"]["Δ BLEU-4"]
    assert softmax.startswith("+") and "[+" in softmax
    assert "full model" not in differences  # the baseline itself
    assert "[" in differences["keyword, noun+pronoun"]["Δ BLEU-4"]  # GPT-pre answers that row, against the full model

    metrics = ablation_summary(runs)
    softmax = metrics["L_eq (softmax)"]["arithmetic"]
    assert softmax["bleu4"] == 0.9 and softmax["delta_vs_full_model"]["n"] == 30
    assert softmax["delta_vs_full_model"]["acc_eq"]["low"] > 0
    assert "delta_vs_full_model" not in metrics["full model"]["arithmetic"]
