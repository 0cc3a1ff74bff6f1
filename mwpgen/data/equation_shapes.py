"""An equation's shape: its one binary operator, else how many it has. Readings are drawn and counted by it
(studies/reading), and "verified: yes" is held to a precision per shape (mwpgen/judge/verified.py)."""

from __future__ import annotations

from mwpgen.data.equations import OPERATORS, normalize_equation, postfix_rhs

SHAPES = ("+", "-", "*", "/", "^", "two operators", "three or more operators", "no operator")


def equation_shape(equation: str) -> str:
    """One of SHAPES; EquationError for what normalize_equation refuses."""
    operators = [s for s in postfix_rhs(normalize_equation(equation)) if s in OPERATORS]
    if len(operators) == 1:
        return operators[0]
    return {0: "no operator", 2: "two operators"}.get(len(operators), "three or more operators")
