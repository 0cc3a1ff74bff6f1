"""studies/equation_profile/equation_profile.py: an equation's operators, problem numbers, constants and bracket
depth."""

from __future__ import annotations

from studies.equation_profile.equation_profile import shape


def test_shape_counts_operators_numbers_constants_and_depth():
    assert shape("x = num1 + num2") == {"operators": ["+"], "nums": 2, "constants": [], "depth": 0}
    s = shape("x = ( ( num2 - 1 ) * num1 ) / num2")
    assert s["operators"] == ["-", "*", "/"] and s["nums"] == 2 and s["constants"] == ["1"] and s["depth"] == 2
    assert shape("x = num1 * 3.14 * num1")["constants"] == ["3.14"]
