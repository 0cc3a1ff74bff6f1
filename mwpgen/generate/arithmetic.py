"""The value of an equation's right-hand side, exactly and within a size bound, for the symbols
mwpgen.data.equations.normalize_equation returns. The grammar is read in one place, mwpgen.data.equations
(postfix_rhs, the order sympy's `equivalent` folds too); this module folds that postfix over Fractions.

Why a size bound: a power's exponent is bounded (a whole number, |e| <= MAX_EXPONENT) but that alone does not
bound the value: `((2^64)^64)^64` has 262,145 bits, five levels take seconds and six ~8 GiB. So every numerator
and denominator stays within MAX_VALUE_BITS bits, checked BEFORE a power is computed (its size is predictable:
bits(base) * |e|) and after every other operation (a sum or product of two bounded values is at most twice as
long, so computing it first costs nothing). MAX_VALUE_BITS = 2048 bits is 617 decimal digits: far above any
problem's numbers (the datasets' longest number has 19 characters) and below Python's 4300-digit limit on
turning an int into text, so the answer can always be printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from mwpgen.data.equations import NEGATE, POSITIVE, PRECEDENCE, is_num_token, postfix_rhs
from mwpgen.data.masking import number_value

MAX_EXPONENT = 64
MAX_VALUE_BITS = 2048
MAX_VALUE_DIGITS = 617  # MAX_VALUE_BITS * log10(2), for messages


class Undefined(ValueError):
    """No value: a division by zero, a power that is not a whole number up to MAX_EXPONENT, a token without a
    value."""


class TooLarge(ValueError):
    """A value (some intermediate numerator or denominator) would need more than MAX_VALUE_BITS bits."""


def value(symbols: list[str], values: Mapping[str, Fraction | int]) -> Fraction:
    """x for `x = ...` (symbols from normalize_equation) and the number tokens' `values`; raises Undefined or
    TooLarge."""
    stack: list[Fraction] = []
    for s in postfix_rhs(symbols):
        if s in (NEGATE, POSITIVE):
            stack.append(-stack.pop() if s == NEGATE else stack.pop())
        elif s in PRECEDENCE:
            right, left = stack.pop(), stack.pop()
            stack.append(_apply(s, left, right))
        else:
            stack.append(_bounded(_operand(s, values)))
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
