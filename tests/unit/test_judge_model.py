"""The learned judge (mwpgen/judge/model.py): a head fitted on hidden states separates what it was shown, the
fine-tuned top layers move and the rest stay, a saved judge answers as it did, and the ranking metrics."""

from __future__ import annotations

import math

import pytest
import torch

from mwpgen.judge.fit import finetune, fit_head
from mwpgen.judge.measure import auc, precision_at_recall, precision_recall, threshold_at_recall
from mwpgen.judge.model import PROMPT, LearnedJudge, decoder_layers
from mwpgen.judge.saved import INFO_FILE, NO_JUDGE_FILE, no_judge_reason, read_info, save_no_judge
from tests.helpers.tiny_model import tiny_model_dir

RIGHT = [f"Tom has num1 apples and gets num2 more {w} . How many apples now ?" for w in ("red", "green", "big", "old")]
WRONG = [
    f"Tom has num1 apples and gives num2 {w} away . How many apples left ?" for w in ("red", "green", "big", "old")
]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    texts = RIGHT + WRONG + [PROMPT, "x = num1 + num2"]
    return tiny_model_dir(tmp_path_factory.mktemp("judge") / "lm", texts, layers=3)


def test_fitted_head_separates_its_readings_and_a_saved_judge_answers_the_same(backbone, tmp_path):
    judge = LearnedJudge.from_lm(backbone, layer=2)
    assert len(decoder_layers(judge.backbone)) == 2
    problems, equations = RIGHT + WRONG, ["x = num1 + num2"] * 8
    labels = [1] * 4 + [0] * 4
    fit_head(judge, judge.hidden(problems, equations), labels, l2=0.01)
    p = judge.probabilities(problems, equations)
    assert auc(p, labels) == 1.0
    judge.info.threshold = threshold_at_recall(p, labels, 0.5)
    judge.save(tmp_path / "judge")
    again = LearnedJudge.load(tmp_path / "judge")
    assert again.info.layer == 2 and again.info.threshold == judge.info.threshold
    assert again.probabilities(problems, equations) == pytest.approx(p, abs=1e-5)


def test_finetune_trains_only_the_top_layers_and_the_head(backbone):
    judge = LearnedJudge.from_lm(backbone, layer=3)
    blocks = decoder_layers(judge.backbone)
    bottom = [t.clone() for t in blocks[0].parameters()]
    top = [t.clone() for t in blocks[2].parameters()]
    finetune(judge, RIGHT + WRONG, ["x = num1 + num2"] * 8, [1] * 4 + [0] * 4, layers=1, epochs=2, lr=1e-3,
             batch_size=4)
    assert all(torch.equal(a, b) for a, b in zip(bottom, blocks[0].parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(top, blocks[2].parameters()))
    assert judge.info.trained_layers == 1


@pytest.mark.parametrize("architecture", ["llama", "gpt2"])
def test_a_prompts_probability_does_not_depend_on_the_batch_it_is_read_in(architecture, tmp_path):
    """Left padding shifts a short prompt beside a long one: positions counted from its first real token keep an
    absolute-position backbone (GPT-2) reading it as it reads it alone."""
    texts = RIGHT + WRONG + [PROMPT, "x = num1 + num2", "and then some more words to make it longer"]
    judge = LearnedJudge.from_lm(tiny_model_dir(tmp_path / architecture, texts, layers=2,
                                                architecture=architecture), layer=2)
    torch.manual_seed(0)
    torch.nn.init.normal_(judge.head.weight)  # a head that reads every dimension of the state
    short, long = RIGHT[0], RIGHT[1] + " and then some more words to make it longer" * 3
    alone = judge.probabilities([short], ["x = num1 + num2"])
    batched = judge.probabilities([short, long], ["x = num1 + num2"] * 2, batch_size=2)
    assert len(judge.encode([long], ["x"])[0]) > len(judge.encode([short], ["x"])[0]) + 10  # padded in the batch
    assert batched[0] == pytest.approx(alone[0], abs=1e-5)


def test_a_missing_judge_names_its_stage(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_judge"):
        LearnedJudge.load(tmp_path)


def test_a_malformed_judge_or_no_judge_file_is_named(backbone, tmp_path):
    judge = LearnedJudge.from_lm(backbone, layer=1).save(tmp_path / "judge")
    (judge / INFO_FILE).write_text('{"backbone": "x", "layer": 1, "threshold": "high"}', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{judge / INFO_FILE}: key 'threshold' must be int or float"):
        LearnedJudge.load(judge)
    (judge / INFO_FILE).write_text('{"backbone": "x", "layer": 1, "gated_by_rule": 1}', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{judge / INFO_FILE}: key 'gated_by_rule' must be bool, got 1"):
        read_info(judge)
    (judge / INFO_FILE).write_text('{"backbone": "x", "layer": true}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"key 'layer' must be int, got True"):
        read_info(judge)
    (judge / INFO_FILE).write_text('{"backbone": "x", "layer": 1, "gated_by_rule": true}', encoding="utf-8")
    assert read_info(judge).gated_by_rule is True
    (judge / INFO_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{judge / INFO_FILE}: not a readable JSON file"):
        read_info(judge)
    none = save_no_judge(tmp_path / "none", "the rule judged validation as well", {"rule_precision": 0.5})
    assert no_judge_reason(none) == "the rule judged validation as well"
    (none / NO_JUDGE_FILE).write_text('"just a string"', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{none / NO_JUDGE_FILE}: expected a JSON object, got str"):
        LearnedJudge.load(none)


def test_ranking_metrics():
    scores, labels = [0.9, 0.8, 0.7, 0.6, 0.5], [1, 0, 1, 0, 0]
    assert auc(scores, labels) == pytest.approx(5 / 6)
    assert auc([0.5, 0.5], [1, 0]) == 0.5
    assert math.isnan(auc([0.1], [1]))
    assert precision_at_recall(scores, labels, 1.0) == pytest.approx(2 / 3)
    t = threshold_at_recall(scores, labels, 0.5)
    assert t == 0.9 and precision_recall(scores, labels, t) == {"threshold": 0.9, "precision": 1.0,
                                                                    "recall": 0.5, "accepted": 1}


def test_the_studys_states_of_every_layer_are_the_judges_own(backbone):
    from studies.learned_judge.compare import hidden_by_layer

    rows = [{"problem": p, "equation": "x = num1 + num2"} for p in RIGHT + WRONG]
    states = hidden_by_layer(str(backbone), [1, 2], rows, None, "tiny")
    for layer in (1, 2):
        judge = LearnedJudge.from_lm(backbone, layer=layer)
        own = judge.hidden([r["problem"] for r in rows], [r["equation"] for r in rows])
        assert torch.allclose(states[layer], own, atol=1e-5)


def test_the_states_cache_embeds_only_new_rows(backbone, tmp_path, monkeypatch):
    from studies.learned_judge import compare

    rows = [{"problem": p, "equation": "x = num1 + num2"} for p in RIGHT + WRONG]
    first = compare.hidden_by_layer(str(backbone), [1, 2], rows[:5], tmp_path, "c")
    embedded = []
    real = compare._embed
    monkeypatch.setattr(compare, "_embed", lambda f, layers, r, n: embedded.append(len(r)) or real(f, layers, r, n))
    again = compare.hidden_by_layer(str(backbone), [1, 2], rows, tmp_path, "c")
    assert embedded == [3] and torch.allclose(again[2][:5], first[2])


def test_calibration_error_is_zero_when_p_is_the_share_right_and_large_when_not():
    from studies.learned_judge.compare import calibration_error

    assert calibration_error([0.25] * 4, [1, 0, 0, 0]) == pytest.approx(0.0)
    assert calibration_error([0.95] * 4, [0, 0, 0, 0]) == pytest.approx(0.95)
