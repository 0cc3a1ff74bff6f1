"""A learned judge's verdict from its probability p: p reaches its threshold, and for a judge gated by the rule the
rule (mwpgen/judge/rule.py) accepts too.

A gated judge accepts only what the rule accepts and ranks by the rule first, then p (`gated_scores`): the rule has
the parse, which the head lacks; the head ranks what the rule accepts (studies/learned_judge/gate.py). Whoever
applies a gated judge gives it the rule's verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence

from mwpgen.judge.saved import JudgeInfo
from mwpgen.judge.verified import verified_threshold


def accepts(info: JudgeInfo, probability: float, rule: bool | None = None) -> bool:
    """The verdict of the judge `info` describes on a problem of judge probability `probability`; `rule`: the rule's
    verdict on it, which a gated judge needs (an error without it)."""
    return reaches(info, info.threshold, probability, rule)


def verifies(info: JudgeInfo, probability: float, rule: bool | None, equation: str) -> bool:
    """Whether a problem written for `equation` is shown as "verified: yes": as `accepts`, held to the threshold of
    the equation's shape instead (mwpgen/judge/verified.py; a shape with none is never verified)."""
    threshold = verified_threshold(info.verified, info.threshold, equation)
    return threshold is not None and reaches(info, threshold, probability, rule)


def reaches(info: JudgeInfo, threshold: float, probability: float, rule: bool | None) -> bool:
    """Whether a problem of judge probability `probability` (and, for a judge gated by the rule, the rule's verdict
    `rule`) reaches `threshold`."""
    if info.gated_by_rule:
        if rule is None:
            raise ValueError("this judge is gated by the rule (judge.json: gated_by_rule): give the rule's verdict")
        if not rule:
            return False
    return probability >= threshold


def gated_scores(probabilities: Sequence[float], rule: Sequence[bool]) -> list[float]:
    """p where the rule accepts, 0 where it rejects: ranking by it is the rule first, then p; a threshold above 0 on
    it is the gated verdict."""
    if len(probabilities) != len(rule):
        raise ValueError(f"{len(probabilities)} judge probabilities for {len(rule)} rule verdicts")
    return [float(q) if r else 0.0 for q, r in zip(probabilities, rule)]


def learned_judge_predictions(predictions: list[dict], probabilities: Sequence[float], info: JudgeInfo) -> float:
    """Add the learned judge's p ("judge_probability", to 4 places) and verdict ("learned_judged": `accepts`, on the
    unrounded p; a gated judge reads the rule's verdict from each record's "judged") to each prediction record of the
    evaluate stage, one p per record, and return the share it accepts: the "consistency (learned)" score. The rule's
    "judged" is left as it is (mwpgen/judge/rule.py)."""
    if len(probabilities) != len(predictions):
        raise ValueError(f"{len(probabilities)} judge probabilities for {len(predictions)} predictions")
    for p, q in zip(predictions, probabilities):
        p["judge_probability"] = round(float(q), 4)
        p["learned_judged"] = accepts(info, q, p.get("judged"))
    return sum(p["learned_judged"] for p in predictions) / max(len(predictions), 1)
