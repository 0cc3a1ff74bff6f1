"""The product's consistency judge (mwpgen/judge/rule.py) and the candidates compared with it (studies/judge_choice),
on a tiny random Llama."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen.judge import rule as judge
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import mwp2eq_examples
from studies.judge_choice import candidates
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    {"equation": "x = num1 - num2", "text": "Joan found num1 shells . She gave num2 away . How many are left ?"},
    {"equation": "x = num1 * num2", "text": "Tom has num1 boxes with num2 candies each . How many candies ?"},
    {"equation": "x = num1 + num2", "text": "A jar holds num1 marbles . Sam adds num2 marbles . How many now ?"},
]


def test_surface_checks_are_what_a_reader_checks_first():
    ok = judge.surface_checks("x = num1 + num2", "Sam has num1 . He gets num2 . How many now ?")
    assert ok == {"numbers_once": True, "extra_numbers": 0, "question": True, "operation_words": True}  # "gets"
    assert judge.surface_checks("x = num1 + num2", "Sam has num1 . He gets num1 . How many ?")["numbers_once"] is False
    assert judge.surface_checks("x = num1 + num2", "num1 and num2 and num3 . How many ?")["extra_numbers"] == 1
    assert judge.surface_checks("x = num1 + num2", "Sam has num1 . He gets num2 .")["question"] is False
    # every operator needs its own cue: "each" signals * (and /), nothing here signals the +
    mixed = judge.surface_checks("x = num1 * num2 + num3", "Sam has num1 boxes of num2 pens each . num3 . How many ?")
    assert mixed["operation_words"] is False
    assert judge.surface_checks("x = num1 * num2 + num3", "Sam has num1 boxes of num2 pens each . He buys num3 "
                                "more . How many in all ?")["operation_words"] is True


@pytest.fixture(scope="module")
def parser(tmp_path_factory):
    corpus = [e.prompt + " " + e.target for e in mwp2eq_examples(RECORDS)]
    model, tok = load_model_and_tokenizer(str(tiny_model_dir(tmp_path_factory.mktemp("m") / "m", corpus)),
                                          Path("unused"))
    return model, tok


def test_the_margin_compares_the_equation_with_the_best_other_beam(parser):
    model, tok = parser
    problems, equations = [r["text"] for r in RECORDS], [r["equation"] for r in RECORDS]
    feats = candidates.features(model, tok, problems, equations, beams=3)
    own = judge.equation_logprobs(model, tok, problems, equations)
    beams = candidates.beam_parses(model, tok, problems, beams=3)
    for f, (logp, n), bs, e, p in zip(feats, own, beams, equations, problems):
        assert f.logp_per_token == pytest.approx(logp / n)
        others = [b for b in dict.fromkeys(bs) if b and not candidates.equivalent(b, e)]
        if others:
            best = max(judge.equation_logprobs(model, tok, [p] * len(others), others), key=lambda s: s[0])[0]
            assert f.margin == pytest.approx(logp - best, abs=1e-4)
        else:
            assert f.margin == candidates.MARGIN_CAP


def test_the_regression_separates_what_its_features_separate_and_reloads():
    feats = [
        candidates.Features(
            margin=m,
            logp_per_token=-1.0,
            exact=m > 0,
            equivalent=m > 0,
            numbers_once=True,
            extra_numbers=0,
            question=True,
            operation_words=True,
        )
        for m in (-3, -2, -1, -0.5, 0.5, 1, 2, 3)
    ]
    labels = [0, 0, 0, 0, 1, 1, 1, 1]
    model = candidates.fit(feats, labels, ("margin",))
    probs = model.probability(feats)
    assert probs == sorted(probs) and probs[3] < 0.5 < probs[4]
    model.threshold = candidates.threshold_for_precision(probs, labels, 0.85)
    assert candidates.precision_recall(model.accepts(feats), labels) == {"precision": 1.0, "recall": 1.0, "accepted": 4,
                                                                   "tp": 4, "fp": 0, "fn": 0}
    again = candidates.JudgeModel.from_dict(model.to_dict())
    assert again.probability(feats) == pytest.approx(probs)


def test_no_threshold_reaches_an_impossible_precision():
    assert candidates.threshold_for_precision([0.9, 0.8], [0, 0], 0.85) == 1.0
    assert torch.isnan(torch.tensor(candidates.precision_recall([False, False], [1, 0])["precision"]))


def test_the_comparison_bench_chooses_on_validation_and_measures_on_test(parser, tmp_path, monkeypatch):
    """studies/judge_choice/compare_judges.py end to end on a handful of labelled problems: a table of candidates on
    the validation part, the chosen judge measured on the test part, features cached for a rerun."""
    import json

    from studies.judge_choice import compare_judges as bench
    model, tok = parser
    model.save_pretrained(tmp_path / "evaluator")
    tok.save_pretrained(tmp_path / "evaluator")
    rows = [{"uid": f"p{i}", "equation": r["equation"], "problem": r["text"], "part": part, "label": label}
            for i, (r, part, label) in enumerate(
                [(RECORDS[i % 3], "validation" if i < 10 else "test", int(i % 2 == 0)) for i in range(14)])]
    monkeypatch.setattr(bench.judge_labels, "labels", lambda: rows)
    monkeypatch.setattr("sys.argv", ["compare_judges", str(tmp_path / "evaluator"), "--out", str(tmp_path / "out")])
    bench.main()
    summary = json.loads((tmp_path / "out" / "judge_choice.json").read_text())
    assert summary["validation"] == 10 and summary["test"] == 4
    assert {c["judge"] for c in summary["candidates"]} == set(bench.RULES) | set(bench.FITTED)
    assert summary["chosen"] in set(bench.RULES) | set(bench.FITTED)
    # With a classifier (here the same tiny model), its candidates join the table; the cached features are reused.
    monkeypatch.setattr("sys.argv", ["compare_judges", str(tmp_path / "evaluator"), "--out", str(tmp_path / "out"),
                                     "--classifier", str(tmp_path / "evaluator")])
    bench.main()
    summary = json.loads((tmp_path / "out" / "judge_choice.json").read_text())
    assert set(bench.WITH_CLASSIFIER) <= {c["judge"] for c in summary["candidates"]}
    assert (tmp_path / "out" / "features.jsonl").exists() and (tmp_path / "out" / "judge_choice.md").exists()


def test_hard_negatives_are_made_from_real_problems_and_are_not_the_same_pair():
    records = [{"equation": "x = num1 - num2", "text": "Sam had num1 apples . He ate num2 . How many are left ?"},
               {"equation": "x = num1 * num2", "text": "Ann has num1 bags of num2 beads . How many beads ?"},
               {"equation": "x = num1 + num2", "text": "A bus has num1 people . num2 get on . How many now ?"}] * 4
    examples = candidates.consistency_examples(records, seed=3)
    first, again, other = examples(0), examples(0), examples(1)
    assert [e.prompt for e in first] == [e.prompt for e in again]  # seeded per epoch
    assert [e.prompt for e in first] != [e.prompt for e in other]  # a fresh negative per epoch
    yes = {e.prompt for e in first if e.target == "yes"}
    no = [e.prompt for e in first if e.target == "no"]
    assert len(yes) == 3 and len(no) == len(records) and not yes & set(no)
    assert candidates._swap_operands("x = num1 - num2", __import__("random").Random(0)) == "x = num2 - num1"
    assert candidates._repeat_number("a num1 b num2 ?", "x = num1 + num2", __import__("random").Random(0)) in (
        "a num1 b num1 ?", "a num2 b num2 ?")


def test_the_classifier_probability_is_its_yes_against_its_no(parser):
    model, tok = parser
    problems, equations = [r["text"] for r in RECORDS], [r["equation"] for r in RECORDS]
    probs = candidates.classifier_probabilities(model, tok, problems, equations, batch_size=2)
    yes, no = (tok(" " + a, add_special_tokens=False)["input_ids"][0] for a in candidates.ANSWERS)
    from mwpgen.lm.prompts import encode_prompt

    ids = torch.tensor([encode_prompt(tok, candidates.classifier_prompt(problems[0], equations[0]))])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, -1]
    assert probs[0] == pytest.approx(float(torch.softmax(logits[[yes, no]], -1)[0]), abs=1e-5)
    assert all(0 < p < 1 for p in probs)


def test_the_judged_verdict_needs_the_parse_and_every_surface_check():
    from mwpgen.judge.rule import judged

    eq = "x = num1 - num2"
    ok = "Joan had num1 shells . She gave num2 away . How many are left ?"
    assert judged("x = num1 - num2", eq, ok)
    assert not judged("x = num1 + num2", eq, ok)  # the parse is another equation
    assert not judged("x = num2 - num1", eq, ok)  # symbol for symbol, as ACC-eq matches
    assert not judged(eq, eq, "Joan had num1 shells . She gave num2 away .")  # no question
    assert not judged(eq, eq, "Joan had num1 shells and num1 cards . She gave num2 away . How many are left ?")
    assert not judged(eq, eq, "Joan had num1 shells . She gave num2 away and num3 more . How many are left ?")
    assert not judged(eq, eq, "Joan had num1 shells . Sam had num2 shells . How many shells does Joan have ?")  # no
    # word of the text signals a subtraction (OPERATION_CUES)


def test_the_judged_column_stays_the_rules_and_the_learned_judge_adds_its_own_verdict():
    from mwpgen.judge.saved import JudgeInfo
    from mwpgen.judge.verdicts import learned_judge_predictions

    eq = "x = num1 - num2"
    ok = "Joan had num1 shells . She gave num2 away . How many are left ?"
    rows = [{"equation": eq, "generated": ok, "parsed": eq}, {"equation": eq, "generated": ok, "parsed": "x"}]
    assert judge.judge_predictions(rows) == 0.5  # consistency (judged): the rule, whatever judge the fold has
    assert [p["judged"] for p in rows] == [True, False] and all(set(p) == {"equation", "generated", "parsed",
                                                                           "judged"} for p in rows)
    # consistency (learned): its own share and verdict, on the unrounded p (0.49996 rounds to 0.5 but is below)
    alone = JudgeInfo("b", 1, threshold=0.5)
    assert learned_judge_predictions(rows, [0.49996, 0.81234], alone) == 0.5
    assert [p["learned_judged"] for p in rows] == [False, True] and [p["judged"] for p in rows] == [True, False]
    assert [p["judge_probability"] for p in rows] == [0.5, 0.8123]
    # gated by the rule: accepted only where "judged" is too (the second's p of 0.9 is not enough)
    gated = JudgeInfo("b", 1, threshold=0.5, gated_by_rule=True)
    assert learned_judge_predictions(rows, [0.6, 0.9], gated) == 0.5
    assert [p["learned_judged"] for p in rows] == [True, False]
    with pytest.raises(ValueError, match="gated by the rule"):
        learned_judge_predictions([{"equation": eq, "generated": ok}], [0.9], gated)
    with pytest.raises(ValueError, match="1 judge probabilities for 2 predictions"):
        learned_judge_predictions(rows, [0.3], alone)
