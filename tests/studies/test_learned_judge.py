"""studies/learned_judge: the readings gathered by part (no text in two parts), and the probe's metrics and
grouped cross-validation."""

from __future__ import annotations

import pytest
import torch

from studies.learned_judge import labels, probe


# the committed sets' one disagreement (tests/unit/test_readings.py names it) is reported on every read of the test part
@pytest.mark.filterwarnings("ignore::mwpgen.judge.readings.LabelConflict")
def test_every_part_reads_and_no_problem_is_in_two_parts():
    parts = {p: {(r["equation"], r["problem"]) for r in labels.labelled(p)} for p in labels.PARTS}
    assert parts["validation"] and parts["test"]
    assert not parts["validation"] & parts["test"] and not parts["train"] & (parts["validation"] | parts["test"])
    assert all(r["label"] in (0, 1) and r["group"] for p in labels.PARTS for r in labels.labelled(p))


def test_auc_and_precision_at_recall():
    assert probe.auc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == 1.0
    assert probe.auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.0
    assert probe.auc([0.5, 0.5], [1, 0]) == 0.5
    # ranked: 1 0 1 0: half the right ones are in after one, at precision 1.0
    assert probe.precision_at_recall([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], 0.5) == 1.0
    assert probe.precision_at_recall([0.9, 0.8, 0.7, 0.6], [0, 1, 1, 0], 1.0) == 2 / 3


def test_cross_validation_never_scores_a_group_it_was_fitted_on():
    # Each group's label is given by a feature only that group has: a fit that saw the group would score it
    # perfectly, a fit that did not cannot do better than chance.
    groups = [f"g{i // 4}" for i in range(80)]
    x = torch.zeros(80, 20)
    y = torch.tensor([(i // 4) % 2 for i in range(80)])
    for i in range(80):
        x[i, i // 4] = 1.0
    p = probe.cross_validate(x, y, groups, l2=0.01)
    assert probe.auc(p, y.tolist()) <= 0.6


def test_the_gate_ranks_what_the_rule_accepts_by_the_probe_and_rejects_the_rest():
    from mwpgen.judge.verdicts import gated_scores as gated
    from studies.learned_judge.gate import figures

    p, rule, y = [0.9, 0.2, 0.8, 0.7, 0.95], [1, 1, 1, 0, 0], [1, 0, 0, 1, 0]
    assert gated(p, rule) == [0.9, 0.2, 0.8, 0.0, 0.0]
    # the probe's p above 0.85 where the rule accepts: one accepted, right; the rule-rejected 0.95 stays out
    f = figures(gated(p, rule), y, 0.85)
    assert (f["accepted"], f["precision"], f["recall"]) == (1, 1.0, 0.5)
