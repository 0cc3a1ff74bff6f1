"""Equations as sequences of math symbols, normalised to `x = <expr>`.

The paper treats an equation as "a sequence of math symbols e_t" (Wang et al. 2021, Sec. 2) and only uses
datasets where each MWP has a single equation with a single unknown (Sec. 4, Datasets). This module turns
a source equation string into such a sequence and rejects everything else with a machine-readable reason.
It reads raw dataset equations (`X=(70.0-27.0)`) and masked ones (`x = num1 - num2`) alike, and is meant for
untrusted input too (prompts, model output, users): the only exception it raises is EquationError.

Symbols: each variable, operator (`+ - * / ^`), parenthesis, `=` and number is one symbol. Decisions,
checked against the raw files:

* Numbers are `123`, `12.5`, optionally with a trailing `%` (Math23K writes `96%`; it is one symbol, as the
  paper's 8.78 symbols per Math23K equation is only reproduced when `%` is not counted separately).
  A unary minus stays a separate `-` symbol (MAWPS has `1.477/-7.0`); masking may fold it into a negative number.
  Scientific notation (`1e5`, `2.5E-3`; none in the data) is read as a number and written out in plain
  decimals (`100000`, `0.0025`), so number symbols always have the form above.
* Masked number tokens `num1`, `num2`, ... (case-insensitive, written lower-case) are numbers, not unknowns.
* Math23K uses `[ ]` as outer brackets; they are checked for matching and then written as `( )`.
* Full-width characters are folded with NFKC first (none occur in the equations today, but the translated
  texts contain `（ ）`, so the same folding is applied everywhere). Look-alike operators are folded too:
  `−` (minus sign), `–` (en dash), `‐ ‑ ‒` to `-`; `×`, `∗`, `⋅` to `*`; `÷`, `∕`, `⁄` to `/`. Superscript
  digits become a power (`3²` -> `3^2`) and vulgar fractions a parenthesised division (`½` -> `(1/2)`), where
  NFKC alone would silently glue their digits to the neighbours (`3²` -> `32`). `·` (middle dot) is NOT
  folded: it is a decimal point in some conventions. Any other stray non-letter character is named in the
  error with its code point (`'—' (U+2014 EM DASH)`).
* Fractions such as `(1/6)` are tokenised as five symbols here; whether they are one *number* depends on the
  problem text, so that decision belongs to masking.
* Mixed numbers like `3(1/2)`: none occur in any equation (grep `\\d\\(`); the one odd form, `(1/6)0` in
  Math23K, is implicit juxtaposition and is rejected as unparsable, as is any implicit multiplication.
* The unknown may be any ASCII identifier, case-insensitive (`x`, `X`, and MAWPS's `number`, `hours`,
  `miles`), and is always written `x`. Other characters (e.g. the Chinese units in `x=80千米/小时`) are stray.
* Division by a literal zero (`3/0`, `3/(0.0)`, `3/-0`) is rejected as `division_by_zero`.
* Limits, far above the data (max over the three datasets: 102 characters, 97 symbols, nesting depth 4,
  numbers of 19 characters): MAX_CHARS characters, MAX_SYMBOLS symbols and numbers of MAX_NUMBER_CHARS
  characters (`too_long`), nesting depth MAX_DEPTH (`too_deep`; each open parenthesis and each pending unary
  sign is one level, so `-(-(1))` has depth 4). The reader is iterative, so no input can exhaust the stack.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

REASONS = ("no_unknown", "multiple_unknowns", "unknown_inside", "unparsable", "division_by_zero", "too_deep",
           "too_long")

MAX_CHARS = 1000  # characters of the source string
MAX_SYMBOLS = 500
MAX_DEPTH = 50
MAX_NUMBER_CHARS = 100  # a number symbol, scientific notation written out

OPERATORS = frozenset("+-*/^")
NUMBER_RE = re.compile(r"\d+(?:\.\d+)?%?")
NUM_TOKEN_RE = re.compile(r"num[0-9]+")
_TOKEN_RE = re.compile(r"(?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?%?)|(?P<var>[A-Za-z_][A-Za-z_0-9]*)"
                       r"|(?P<sym>[-+*/^()\[\]=])")
_NUM_TOKEN_ANY_CASE = re.compile(r"num[0-9]+", re.IGNORECASE)
_ZERO_RE = re.compile(r"0+(?:\.0+)?%?")

_LOOKALIKES = str.maketrans({
    "\u2212": "-", "\u2013": "-", "\u2010": "-", "\u2011": "-", "\u2012": "-",  # minus sign, en dash, hyphens
    "\u00d7": "*", "\u2217": "*", "\u22c5": "*",  # multiplication sign, asterisk operator, dot operator
    "\u00f7": "/", "\u2215": "/", "\u2044": "/",  # division sign, division slash, fraction slash
})
_SUPERSCRIPT_RUN = re.compile("[\u207a\u207b]?[\u2070\u00b9\u00b2\u00b3\u2074-\u2079]+")
_SUPERSCRIPTS = str.maketrans("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207a\u207b",
                              "0123456789+-")


class EquationError(ValueError):
    """An equation outside the paper's scope or unreadable; `reason` is one of REASONS."""

    def __init__(self, reason: str, detail: str):
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def is_number(symbol: str) -> bool:
    return NUMBER_RE.fullmatch(symbol) is not None


def is_num_token(symbol: str) -> bool:
    """A masked number, `num1`, `num2`, ..."""
    return NUM_TOKEN_RE.fullmatch(symbol) is not None


def is_variable(symbol: str) -> bool:
    return (symbol[:1].isalpha() or symbol[:1] == "_") and not is_num_token(symbol)


def _show(equation: str) -> str:
    """The source for an error message, cut when long."""
    return repr(equation) if len(equation) <= 200 else f"{equation[:200]!r}... ({len(equation)} characters)"


def _describe(char: str) -> str:
    """A stray character: letters as themselves, anything else non-ASCII with its code point and name."""
    if char.isascii() or unicodedata.category(char).startswith("L"):
        return repr(char)
    name = unicodedata.name(char, "")
    return f"{char!r} (U+{ord(char):04X}{' ' + name if name else ''})"


def _fold(equation: str) -> str:
    """NFKC plus the look-alike operators; superscripts and vulgar fractions are kept apart from their
    neighbours, other digit-like characters (`①`, `₂`) are left unfolded and so stay stray."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^" + m.group().translate(_SUPERSCRIPTS), equation)
    parts: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char.isascii() or unicodedata.category(char) != "No":
            continue
        parts.append(unicodedata.normalize("NFKC", text[start:i]))
        if unicodedata.decomposition(char).startswith("<fraction>"):
            parts.append("(" + unicodedata.normalize("NFKC", char) + ")")
        else:
            parts.append(char)
        start = i + 1
    parts.append(unicodedata.normalize("NFKC", text[start:]))
    return "".join(parts).translate(_LOOKALIKES)


def _plain_number(surface: str, equation: str) -> str:
    """The number symbol for a matched number: scientific notation written out; length checked."""
    mantissa, exp_mark, rest = surface.replace("E", "e").partition("e")
    if exp_mark:
        percent = "%" if rest.endswith("%") else ""
        exponent = rest.rstrip("%")
        if len(exponent.lstrip("+-").lstrip("0")) > 3:
            raise EquationError("too_long", f"number {surface!r} has more than {MAX_NUMBER_CHARS} characters "
                                f"written out (limit {MAX_NUMBER_CHARS}) in {_show(equation)}")
        value = Decimal(mantissa + "e" + exponent)  # exact: construction from a string does not round
        digits, exp = len(value.as_tuple().digits), int(value.as_tuple().exponent)
        if max(1, digits + exp) + max(0, -exp) + 1 > MAX_NUMBER_CHARS:
            raise EquationError("too_long", f"number {surface!r} has more than {MAX_NUMBER_CHARS} characters "
                                f"written out (limit {MAX_NUMBER_CHARS}) in {_show(equation)}")
        number = format(value, "f") + percent
    else:
        number = surface
    if len(number) > MAX_NUMBER_CHARS:
        raise EquationError("too_long", f"number of {len(number)} characters (limit {MAX_NUMBER_CHARS}) "
                            f"in {_show(equation)}")
    return number


def tokenize(equation: str) -> list[str]:
    """Split into symbols; brackets are checked for matching and normalised to parentheses."""
    if not isinstance(equation, str):
        raise EquationError("unparsable", f"expected a string, got {type(equation).__name__}")
    if len(equation) > MAX_CHARS:
        raise EquationError("too_long", f"{len(equation)} characters (limit {MAX_CHARS}) in {_show(equation)}")
    text = _fold(equation).strip()
    symbols: list[str] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            break
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise EquationError("unparsable", f"stray character {_describe(text[pos])} at position {pos} "
                                f"in {_show(equation)}")
        if m.group("num"):
            after = text[m.end():m.end() + 1]
            if after.isascii() and (after.isalpha() or after == "_"):
                raise EquationError("unparsable", f"number {m.group('num')!r} directly followed by {after!r} at "
                                    f"position {m.end()} in {_show(equation)} (no implicit multiplication; "
                                    f"scientific notation is written like 1e5)")
            symbols.append(_plain_number(m.group("num"), equation))
        elif m.group("var"):
            var = m.group("var")
            symbols.append(var.lower() if _NUM_TOKEN_ANY_CASE.fullmatch(var) else var)
        else:
            symbols.append(m.group("sym"))
        if len(symbols) > MAX_SYMBOLS:
            raise EquationError("too_long", f"more than {MAX_SYMBOLS} symbols (limit {MAX_SYMBOLS}) "
                                f"in {_show(equation)}")
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
                raise EquationError("unparsable", f"unbalanced brackets in {_show(equation)}")
    if stack:
        raise EquationError("unparsable", f"unbalanced brackets in {_show(equation)}")


# Binding strength; NEGATE / POSITIVE are the unary signs (prefix operators) as postfix writes them.
NEGATE, POSITIVE = "neg", "pos"
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, NEGATE: 3, POSITIVE: 3, "^": 4}
_RIGHT_GROUPING = {"^", NEGATE, POSITIVE}


def _applied_before(top: str, incoming: str) -> bool:
    """Whether operator `top`, pending, is applied before the binary operator `incoming` is pushed."""
    if incoming in _RIGHT_GROUPING:
        return PRECEDENCE[top] > PRECEDENCE[incoming]
    return PRECEDENCE[top] >= PRECEDENCE[incoming]


class _Reader:
    """The one reader of the grammar below: it checks one side and writes it in postfix order (shunting-yard).

    expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := unary ('^' factor)?
    unary := ('-'|'+') unary | primary ; primary := number | variable | '(' expr ')'

    As a language this is: operands and binary operators alternate, any operand may carry prefix signs and
    be a parenthesised expression. A two-state machine accepts exactly that, with a stack of open parentheses,
    and reports the same errors at the same symbol as a recursive-descent reading would. Nesting (open
    parentheses plus pending signs) is bounded by MAX_DEPTH.

    Precedence, the one sympy uses too (`equivalent` folds this postfix): `* /` bind tighter than `+ -`, a unary
    sign tighter than `* /` but looser than `^`, so `-a^b` is `-(a^b)` and `2^-1` is `2^(-1)`; `^` groups to
    the right (`a^b^c` = `a^(b^c)`). Unary signs are written NEGATE / POSITIVE in the postfix.
    """

    def __init__(self, symbols: list[str], source: str):
        self.symbols, self.source = symbols, source

    def _fail(self, what: str, pos: int):
        got = self.symbols[pos] if pos < len(self.symbols) else None
        where = f"symbol {pos + 1} ({got!r})" if got is not None else "the end"
        raise EquationError("unparsable", f"{what} at {where} in {_show(self.source)}")

    def _deeper(self, nesting: int, pos: int) -> int:
        if nesting > MAX_DEPTH:
            raise EquationError("too_deep", f"nesting deeper than {MAX_DEPTH} levels (open parentheses and unary "
                                f"signs; limit {MAX_DEPTH}) at symbol {pos + 1} in {_show(self.source)}")
        return nesting

    def read(self) -> list[str]:
        """The side's symbols in postfix order, or EquationError naming the first symbol at fault."""
        if not self.symbols:
            self._fail("empty expression", 0)
        out: list[str] = []
        pending: list[str] = []  # operators, unary signs and "(" not yet written
        open_signs: list[int] = []  # for each open '(', the signs pending before it
        signs = nesting = 0
        want_operand = True
        for pos, s in enumerate(self.symbols):
            if want_operand:
                if s in ("-", "+"):
                    signs += 1
                    nesting = self._deeper(nesting + 1, pos)
                    pending.append(NEGATE if s == "-" else POSITIVE)  # prefix: nothing to its left to pop
                elif s == "(":
                    open_signs.append(signs)
                    signs = 0
                    nesting = self._deeper(nesting + 1, pos)
                    pending.append(s)
                elif s in OPERATORS or s in (")", "="):
                    self._fail("expected a number, variable or '('", pos)
                else:  # number or variable: the pending signs apply to it
                    nesting -= signs
                    signs = 0
                    want_operand = False
                    out.append(s)
            elif s in OPERATORS:
                while pending and pending[-1] != "(" and _applied_before(pending[-1], s):
                    out.append(pending.pop())
                pending.append(s)
                want_operand = True
            elif s == ")" and open_signs:
                nesting -= 1 + open_signs.pop()
                while pending[-1] != "(":
                    out.append(pending.pop())
                pending.pop()
            else:
                self._fail("expected ')'" if open_signs else "unexpected symbol", pos)
        if want_operand:
            self._fail("expected a number, variable or '('", len(self.symbols))
        if open_signs:
            self._fail("expected ')'", len(self.symbols))
        out.extend(reversed(pending))
        return out

    def check_division(self) -> None:
        """Reject `/` whose divisor is a literal zero, possibly signed and parenthesised: `/ 0`, `/ ( - 0 )`."""
        symbols = self.symbols
        for i, s in enumerate(symbols):
            if s != "/":
                continue
            j, opened = i + 1, 0
            while j < len(symbols) and symbols[j] in ("(", "-", "+"):
                opened += symbols[j] == "("
                j += 1
            if j >= len(symbols) or not _ZERO_RE.fullmatch(symbols[j]):
                continue
            end = j + 1 + opened
            if symbols[j + 1:end] == [")"] * opened and (end >= len(symbols) or symbols[end] != "^"):
                divisor = " ".join(symbols[i + 1:end])
                raise EquationError("division_by_zero", f"division by the literal zero {divisor!r} at symbol "
                                    f"{i + 1} in {_show(self.source)}")


def normalize_equation(equation: str) -> list[str]:
    """Return the symbols of `x = <expr>` for a single-unknown equation, or raise EquationError.

    Accepts `x=expr` and `expr=x`; the unknown must stand alone on one side (anything else, e.g. MAWPS's
    `X-9=4`, is `unknown_inside`: solving it would change the problem's equation, which the paper conditions on).
    `numK` tokens are numbers, so masked equations (`x = num1 + num2`) are read too.
    No other exception than EquationError escapes, whatever the input.
    """
    symbols = tokenize(equation)
    unknowns = sorted({s.lower() for s in symbols if is_variable(s)})
    if not unknowns:
        raise EquationError("no_unknown", f"no unknown variable in {_show(equation)}")
    if len(unknowns) > 1:
        raise EquationError("multiple_unknowns", f"unknowns {', '.join(unknowns)} in {_show(equation)}")
    n_eq = symbols.count("=")
    if n_eq != 1:
        raise EquationError("unparsable", f"expected exactly one '=', found {n_eq} in {_show(equation)}")
    split = symbols.index("=")
    left, right = symbols[:split], symbols[split + 1:]
    readers = [_Reader(side, equation) for side in (left, right)]
    for reader in readers:
        reader.read()
    for reader in readers:
        reader.check_division()
    if len(left) == 1 and is_variable(left[0]) and not any(is_variable(s) for s in right):
        expr = right
    elif len(right) == 1 and is_variable(right[0]) and not any(is_variable(s) for s in left):
        expr = left
    else:
        raise EquationError("unknown_inside", f"the unknown is not alone on one side of {_show(equation)}")
    return ["x", "="] + expr


def equation_string(symbols: list[str]) -> str:
    return " ".join(symbols)


def canonical_equation(equation: str) -> str:
    """The one written form every stage uses: symbols separated by single spaces and no redundant parentheses
    around the whole right-hand side (`x = ( num1 - num2 )` -> `x = num1 - num2`). Any string is accepted
    (mwp2eq's output may be malformed): only a pair that really encloses the whole side is removed."""
    symbols = equation.split()
    if len(symbols) < 3 or symbols[1] != "=":
        return " ".join(symbols)
    rhs = symbols[2:]
    while len(rhs) >= 2 and rhs[0] == "(" and rhs[-1] == ")" and _closing(rhs, 0) == len(rhs) - 1:
        rhs = rhs[1:-1]
    return " ".join(symbols[:2] + rhs)


def _closing(symbols: list[str], start: int) -> int | None:
    depth = 0
    for i in range(start, len(symbols)):
        depth += {"(": 1, ")": -1}.get(symbols[i], 0)
        if depth == 0:
            return i
    return None


def postfix_rhs(symbols: list[str]) -> list[str]:
    """The right-hand side of `x = ...` (symbols from normalize_equation) in postfix order: what `equivalent` and
    mwpgen.generate.arithmetic fold, so the grammar is read in one place."""
    return _Reader(symbols[2:], equation_string(symbols)).read()


def _sympy_rhs(symbols: list[str]):
    """The right-hand side of `x = ...` (symbols from normalize_equation) as a sympy expression: numK tokens and
    constants-as-written become symbols and exact rationals."""
    import sympy

    stack = []
    for s in postfix_rhs(symbols):
        if s in (NEGATE, POSITIVE):
            stack.append(-stack.pop() if s == NEGATE else stack.pop())
        elif s in PRECEDENCE:
            right, left = stack.pop(), stack.pop()
            stack.append(_sympy_apply(s, left, right))
        elif is_num_token(s):
            stack.append(sympy.Symbol(s))
        else:
            stack.append(sympy.Rational(s[:-1]) / 100 if s.endswith("%") else sympy.Rational(s))
    return stack[0]


def _sympy_apply(op: str, left, right):
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "/":
        return left / right
    return left ** right


def equivalent(predicted: str, reference: str) -> bool:
    """ACC-eq (equivalent): the predicted equation is symbolically the reference (sympy, `num` tokens as symbols):
    `x = num2 + num1` matches `x = ( num1 + num2 )`. A prediction that is not a valid single-unknown equation is
    not equivalent to anything."""
    if canonical_equation(predicted) == canonical_equation(reference):
        return True
    try:
        a, b = _sympy_rhs(normalize_equation(predicted)), _sympy_rhs(normalize_equation(reference))
    except (EquationError, SyntaxError, TypeError, ValueError, ZeroDivisionError):
        return False
    import sympy

    difference = sympy.cancel(sympy.together(a - b))
    return bool(difference == 0 or sympy.simplify(difference) == 0)
