"""What "verified: yes" is held to (mwpgen/judge/verified.py): thresholds chosen for precision on validation
readings, per equation shape, and the verdict the product gives with them (mwpgen.judge.verdicts.verifies)."""

from __future__ import annotations

import pytest

from mwpgen.data.equation_shapes import SHAPES, equation_shape
from mwpgen.judge.saved import JudgeInfo
from mwpgen.judge.verdicts import accepts, verifies
from mwpgen.judge.verified import choose_verified, never_verified_reason, precision_threshold, verified_threshold

SCORES = [0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4]
LABELS = [1, 1, 1, 0, 1, 1, 0, 0]  # cuts' precision from the top: 1, 1, 1, .75, .8, .83, .71, .63


def test_the_threshold_is_the_lowest_below_which_no_higher_cut_falls_short():
    assert precision_threshold(SCORES, LABELS, 0.7, min_accepted=1) == 0.5
    # 0.6's cut alone reaches 0.8, but 0.8's cut does not: a threshold is never below a cut that fails
    assert precision_threshold(SCORES, LABELS, 0.8, min_accepted=1) == 0.85
    # cuts of fewer than min_accepted readings are not asked to hold it, nor may a threshold rest on them
    assert precision_threshold(SCORES, LABELS, 0.8, min_accepted=5) == 0.6
    assert precision_threshold(SCORES, LABELS, 0.95, min_accepted=4) is None
    assert precision_threshold([0.9, 0.9, 0.5], [1, 0, 1], 0.6, min_accepted=1) is None  # a tie is one cut
    assert precision_threshold([0.0, 0.0], [1, 1], 0.5, min_accepted=1) is None  # a gated judge's 0: never


def test_each_shape_is_held_to_its_own_readings_and_a_shape_they_cannot_hold_is_never_verified():
    equations = ["x = num1 + num2"] * 4 + ["x = num1 - num2"] * 4 + ["x = num1 / num2"] * 3
    scores = [0.9, 0.8, 0.7, 0.6] + [0.95, 0.85, 0.75, 0.65] + [0.99, 0.3, 0.2]
    labels = [1, 1, 1, 1] + [1, 1, 0, 0] + [0, 0, 0]
    chosen = choose_verified(scores, labels, equations, 0.9, min_accepted=2)
    # one threshold for all would be none at all: the wrong / problem scores highest
    assert precision_threshold(scores, labels, 0.9, 2) is None
    assert chosen["thresholds"] == {**dict.fromkeys(SHAPES), "+": 0.6, "-": 0.85}
    assert chosen["validation"]["-"] == {"n": 4, "right": 2, "accepted": 2, "tp": 2, "precision": 1.0}
    assert chosen["validation"]["/"] == {"n": 3, "right": 0, "accepted": 0, "tp": 0, "precision": None}
    assert set(chosen["validation"]) == {"+", "-", "/"}  # shapes with readings
    assert chosen["validation_all"] == {"n": 11, "right": 6, "accepted": 6, "tp": 6, "precision": 1.0}
    with pytest.raises(ValueError, match="one of each per validation reading"):
        choose_verified(scores, labels[:-1], equations, 0.9, 2)


def test_the_product_verifies_at_the_shapes_threshold_and_never_for_a_shape_without_one():
    chosen = choose_verified([0.9, 0.8, 0.2], [1, 1, 0], ["x = num1 + num2"] * 2 + ["x = num1 * num2"], 0.9, 1)
    info = JudgeInfo("tiny", 1, threshold=0.5, verified=chosen)
    assert verifies(info, 0.8, None, "x = 3 + 4") and not verifies(info, 0.79, None, "x = num2 + num1")
    assert accepts(info, 0.6)  # the judge's own verdict (the learned consistency score) keeps its threshold
    assert not verifies(info, 0.99, None, "x = num1 * num2") and verified_threshold(chosen, 0.5, "x = 2 * 3") is None
    assert "shape * are never verified: 0 of 1 validation readings of its shape are read right" in \
        never_verified_reason(chosen, "x = num1 * num2")
    assert "no validation reading has its shape" in never_verified_reason(chosen, "x = num1 - num2")
    gated = JudgeInfo("tiny", 1, threshold=0.5, gated_by_rule=True, verified=chosen)
    assert not verifies(gated, 0.95, False, "x = num1 + num2") and verifies(gated, 0.95, True, "x = num1 + num2")
    with pytest.raises(ValueError, match="give the rule's verdict"):
        verifies(gated, 0.95, None, "x = num1 + num2")
    # a judge saved before per-shape thresholds verifies at its own threshold, every shape alike
    assert verifies(JudgeInfo("tiny", 1, threshold=0.5), 0.5, None, "x = num1 * num2")


@pytest.mark.parametrize("equation, shape", [
    ("x = num1 + num2", "+"), ("x = ( num1 - num2 ) / num3", "two operators"), ("x = num1", "no operator"),
    ("x = 2 * 3 * 4 - 1", "three or more operators"), ("x = num1 ^ 2", "^")])
def test_equation_shapes(equation, shape):
    assert equation_shape(equation) == shape
