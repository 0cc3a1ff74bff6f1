"""The value of an equation's right-hand side, exactly and within a size bound: the generate package's one reader
of the equation grammar, over the symbols mwpgen.data.equations.normalize_equation returns (which has already
checked the grammar, the brackets and the nesting).

The grammar and its precedence are the ones normalize_equation checks and sympy reads (mwpgen.data.equations
.equivalent): `* /` bind tighter than `+ -`, a unary sign tighter than `* /` but looser than `^`, so `-a^b` is
`-(a^b)` and `2^-1` is `2^(-1)`; `^` groups to the right (`a^b^c` = `a^(b^c)`). The symbols are turned into
postfix order (shunting-yard, no recursion, so no input can exhaust the stack) and folded over Fractions.

Why a size bound: a power's exponent is bounded (a whole number, |e| <= MAX_EXPONENT) but that alone does not
bound the value: `((2^64)^64)^64` has 262,145 bits, five levels take seconds and six ~8 GiB. So every numerator
and denominator stays within MAX_VALUE_BITS bits, checked BEFORE a power is computed (its size is predictable:
bits(base) * |e|) and after every other operation (a sum or product of two bounded values is at most twice as
long, so computing it first costs nothing). MAX_VALUE_BITS = 2048 bits is 617 decimal digits: far above any
problem's numbers (the datasets' longest number has 19 characters) and below Python's 4300-digit limit on
turning an int into text, so the answer can always be printed.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from mwpgen.data.equations import is_num_token
from mwpgen.data.masking import number_value

MAX_EXPONENT = 64
MAX_VALUE_BITS = 2048
MAX_VALUE_DIGITS = 617  # MAX_VALUE_BITS * log10(2), for messages

# Binding strength; NEGATE / POSITIVE are the unary signs (prefix operators).
NEGATE, POSITIVE = "neg", "pos"
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, NEGATE: 3, POSITIVE: 3, "^": 4}
_RIGHT_GROUPING = {"^", NEGATE, POSITIVE}


class Undefined(ValueError):
    """No value: a division by zero, a power that is not a whole number up to MAX_EXPONENT, a token without a
    value, symbols outside the grammar."""


class TooLarge(ValueError):
    """A value (some intermediate numerator or denominator) would need more than MAX_VALUE_BITS bits."""


def postfix(symbols: list[str]) -> list[str]:
    """The right-hand side's symbols (no `x =`) in postfix order, unary signs written NEGATE / POSITIVE."""
    out: list[str] = []
    pending: list[str] = []  # operators and "(" not yet written
    want_operand = True
    for s in symbols:
        if want_operand and s in ("+", "-"):
            pending.append(NEGATE if s == "-" else POSITIVE)  # prefix: nothing to its left to pop
        elif s == "(":
            pending.append(s)
        elif s == ")":
            while pending and pending[-1] != "(":
                out.append(pending.pop())
            if not pending:
                raise Undefined("unbalanced brackets")
            pending.pop()
            want_operand = False
        elif s in _PRECEDENCE:
            if want_operand:
                raise Undefined(f"operator {s!r} without an operand")
            while pending and pending[-1] != "(" and _pops(pending[-1], s):
                out.append(pending.pop())
            pending.append(s)
            want_operand = True
        else:
            out.append(s)
            want_operand = False
    if want_operand:
        raise Undefined("the expression ends with an operator")
    while pending:
        if pending[-1] == "(":
            raise Undefined("unbalanced brackets")
        out.append(pending.pop())
    return out


def _pops(top: str, incoming: str) -> bool:
    """Whether operator `top` on the stack is applied before `incoming` (binary) is pushed."""
    if incoming in _RIGHT_GROUPING:
        return _PRECEDENCE[top] > _PRECEDENCE[incoming]
    return _PRECEDENCE[top] >= _PRECEDENCE[incoming]


def value(symbols: list[str], values: Mapping[str, Fraction | int]) -> Fraction:
    """x for the right-hand side's `symbols` and the number tokens' `values`; raises Undefined or TooLarge."""
    stack: list[Fraction] = []
    for s in postfix(symbols):
        if s in (NEGATE, POSITIVE):
            stack.append(-stack.pop() if s == NEGATE else stack.pop())
        elif s in _PRECEDENCE:
            right, left = stack.pop(), stack.pop()
            stack.append(_apply(s, left, right))
        else:
            stack.append(_bounded(_operand(s, values)))
    if len(stack) != 1:
        raise Undefined("not one expression")
    return stack[0]


def _operand(symbol: str, values: Mapping[str, Fraction | int]) -> Fraction:
    if is_num_token(symbol):
        if symbol not in values:
            raise Undefined(f"{symbol} has no value")
        return Fraction(values[symbol])
    try:
        return number_value(symbol)
    except (ValueError, ZeroDivisionError):
        raise Undefined(f"{symbol!r} is not a number") from None


def _apply(op: str, left: Fraction, right: Fraction) -> Fraction:
    if op == "+":
        return _bounded(left + right)
    if op == "-":
        return _bounded(left - right)
    if op == "*":
        return _bounded(left * right)
    if op == "/":
        if right == 0:
            raise Undefined("division by zero")
        return _bounded(left / right)
    return _power(left, right)


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1 or abs(exponent) > MAX_EXPONENT or (base == 0 and exponent < 0):
        raise Undefined(f"a power that is not a whole number up to {MAX_EXPONENT}")
    times = abs(int(exponent))
    longest = max(base.numerator.bit_length(), base.denominator.bit_length())
    if (longest - 1) * times + 1 > MAX_VALUE_BITS:  # checked before computing: base ** e is what exhausts memory
        raise TooLarge(f"a power with about {int(longest * times * 0.30103)} digits")
    return _bounded(base ** int(exponent))


def _bounded(v: Fraction) -> Fraction:
    if max(v.numerator.bit_length(), v.denominator.bit_length()) > MAX_VALUE_BITS:
        raise TooLarge(f"a value with more than {MAX_VALUE_DIGITS} digits")
    return v
