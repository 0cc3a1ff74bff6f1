"""studies/evaluator_errors/evaluator_errors.py: each wrong parse of the evaluator sorted into one kind."""

import pytest

from studies.evaluator_errors import evaluator_errors


@pytest.mark.parametrize("parsed, kind", [
    ("x = ( num1 - num2 )", "correct"),
    ("x = num1 + -1 * num2", "equivalent"),
    ("x = num1 -", "malformed"),
    ("x = num1 - num3", "other numbers"),
    ("x = num1 - num2 - num2", "other numbers"),
    ("x = num1 + num2", "other operators"),
    ("x = num2 - num1", "operand order"),
])
def test_kind_of_a_parse_of_x_equals_num1_minus_num2(parsed, kind):
    assert evaluator_errors.kind_of(parsed, "x = num1 - num2") == kind


def test_analyse_counts_kinds_and_accuracy_by_equation_size():
    rows = [{"equation": "x = num1 + num2", "parsed": "x = num2 + num1"},
            {"equation": "x = num1 + num2", "parsed": "x = num1 + num2"},
            {"equation": "x = ( num1 + num2 ) * num3", "parsed": "x = num1 + num2 * num3"}]
    result = evaluator_errors.analyse(rows)
    assert result["kinds"]["correct"] == 1 and result["kinds"]["equivalent"] == 1
    assert result["kinds"]["operand order"] == 1
    assert result["by_operators"][1] == {"n": 2, "acc_eq": 0.5, "acc_eq_equivalent": 1.0}
    assert result["by_operators"][2]["acc_eq_equivalent"] == 0.0
