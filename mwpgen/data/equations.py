"""Equations as sequences of math symbols, normalised to `x = <expr>`.

The paper treats an equation as "a sequence of math symbols e_t" (Wang et al. 2021, Sec. 2) and only uses
datasets where each MWP has a single equation with a single unknown (Sec. 4, Datasets). This module turns
a source equation string into such a sequence and rejects everything else with a machine-readable reason.

Symbols: each variable, operator (`+ - * / ^`), parenthesis, `=` and number is one symbol. Decisions,
checked against the raw files:

* Numbers are `123`, `12.5`, optionally with a trailing `%` (Math23K writes `96%`; it is one symbol, as the
  paper's 8.78 symbols per Math23K equation is only reproduced when `%` is not counted separately).
  A unary minus stays a separate `-` symbol (MAWPS has `1.477/-7.0`); masking may fold it into a negative number.
* Math23K uses `[ ]` as outer brackets; they are checked for matching and then written as `( )`.
* Full-width characters are folded with NFKC first (none occur in the equations today, but the translated
  texts contain `（ ）`, so the same folding is applied everywhere).
* Fractions such as `(1/6)` are tokenised as five symbols here; whether they are one *number* depends on the
  problem text, so that decision belongs to masking.
* Mixed numbers like `3(1/2)`: none occur in any equation (grep `\\d\\(`); the one odd form, `(1/6)0` in
  Math23K, is implicit juxtaposition and is rejected as unparsable, as is any implicit multiplication.
* The unknown may be any ASCII identifier, case-insensitive (`x`, `X`, and MAWPS's `number`, `hours`,
  `miles`), and is always written `x`. Other characters (e.g. the Chinese units in `x=80千米/小时`) are stray.
"""

from __future__ import annotations

import re
import unicodedata

REASONS = ("no_unknown", "multiple_unknowns", "unknown_inside", "unparsable")

OPERATORS = frozenset("+-*/^")
NUMBER_RE = re.compile(r"\d+(?:\.\d+)?%?")
_TOKEN_RE = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?%?)|(?P<var>[A-Za-z_][A-Za-z_0-9]*)|(?P<sym>[-+*/^()\[\]=]))")


class EquationError(ValueError):
    """An equation outside the paper's scope or unreadable; `reason` is one of REASONS."""

    def __init__(self, reason: str, detail: str):
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def is_number(symbol: str) -> bool:
    return NUMBER_RE.fullmatch(symbol) is not None


def tokenize(equation: str) -> list[str]:
    """Split into symbols; brackets are checked for matching and normalised to parentheses."""
    text = unicodedata.normalize("NFKC", equation).strip()
    symbols: list[str] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise EquationError("unparsable", f"stray character {text[pos]!r} at position {pos} in {equation!r}")
        symbols.append(m.group("num") or m.group("var") or m.group("sym"))
        pos = m.end()
    _check_brackets(symbols, equation)
    return [{"[": "(", "]": ")"}.get(s, s) for s in symbols]


def _check_brackets(symbols: list[str], equation: str) -> None:
    stack: list[str] = []
    for s in symbols:
        if s in "([":
            stack.append(s)
        elif s in ")]":
            if not stack or {"(": ")", "[": "]"}[stack.pop()] != s:
                raise EquationError("unparsable", f"unbalanced brackets in {equation!r}")
    if stack:
        raise EquationError("unparsable", f"unbalanced brackets in {equation!r}")


def is_variable(symbol: str) -> bool:
    return symbol[0].isalpha() or symbol[0] == "_"


class _Parser:
    """Recursive-descent check of the grammar below; it only validates, symbols are kept as they are.

    expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := unary ('^' factor)?
    unary := ('-'|'+') unary | primary ; primary := number | variable | '(' expr ')'
    """

    def __init__(self, symbols: list[str], source: str):
        self.symbols, self.pos, self.source = symbols, 0, source

    def _peek(self) -> str | None:
        return self.symbols[self.pos] if self.pos < len(self.symbols) else None

    def _fail(self, what: str):
        got = self._peek()
        where = f"symbol {self.pos + 1} ({got!r})" if got is not None else "the end"
        raise EquationError("unparsable", f"{what} at {where} in {self.source!r}")

    def parse(self) -> None:
        if not self.symbols:
            self._fail("empty expression")
        self._expr()
        if self._peek() is not None:
            self._fail("unexpected symbol")

    def _expr(self) -> None:
        self._term()
        while self._peek() in ("+", "-"):
            self.pos += 1
            self._term()

    def _term(self) -> None:
        self._factor()
        while self._peek() in ("*", "/"):
            self.pos += 1
            self._factor()

    def _factor(self) -> None:
        self._unary()
        if self._peek() == "^":
            self.pos += 1
            self._factor()

    def _unary(self) -> None:
        if self._peek() in ("-", "+"):
            self.pos += 1
            self._unary()
        else:
            self._primary()

    def _primary(self) -> None:
        s = self._peek()
        if s is None or s in OPERATORS or s in (")", "="):
            self._fail("expected a number, variable or '('")
        self.pos += 1
        if s == "(":
            self._expr()
            if self._peek() != ")":
                self._fail("expected ')'")
            self.pos += 1


def normalize_equation(equation: str) -> list[str]:
    """Return the symbols of `x = <expr>` for a single-unknown equation, or raise EquationError.

    Accepts `x=expr` and `expr=x`; the unknown must stand alone on one side (anything else, e.g. MAWPS's
    `X-9=4`, is `unknown_inside`: solving it would change the problem's equation, which the paper conditions on).
    """
    symbols = tokenize(equation)
    unknowns = sorted({s.lower() for s in symbols if is_variable(s)})
    if not unknowns:
        raise EquationError("no_unknown", f"no unknown variable in {equation!r}")
    if len(unknowns) > 1:
        raise EquationError("multiple_unknowns", f"unknowns {', '.join(unknowns)} in {equation!r}")
    n_eq = symbols.count("=")
    if n_eq != 1:
        raise EquationError("unparsable", f"expected exactly one '=', found {n_eq} in {equation!r}")
    split = symbols.index("=")
    left, right = symbols[:split], symbols[split + 1:]
    for side in (left, right):
        _Parser(side, equation).parse()
    if len(left) == 1 and is_variable(left[0]) and not any(is_variable(s) for s in right):
        expr = right
    elif len(right) == 1 and is_variable(right[0]) and not any(is_variable(s) for s in left):
        expr = left
    else:
        raise EquationError("unknown_inside", f"the unknown is not alone on one side of {equation!r}")
    return ["x", "="] + expr


def equation_string(symbols: list[str]) -> str:
    return " ".join(symbols)
