"""Property-based checks of equation reading (Hypothesis): well-formed equations round-trip, and no input,
however hostile, makes the reader raise anything but EquationError."""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mwpgen.data.equations import MAX_DEPTH, REASONS, EquationError, equation_string, normalize_equation, tokenize
from mwpgen.data.masking import MaskingError, mask_problem
from mwpgen.data.preprocess import preprocess_problems
from mwpgen.data.raw import RawProblem

# database=None: no .hypothesis/ folder in the repository; a failure prints its example instead.
SETTINGS = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# --- well-formed equations -------------------------------------------------------------------------------

NUM_TOKENS = st.integers(1, 40).map(lambda k: f"num{k}")
LITERALS = st.from_regex(r"[0-9]{1,6}(\.[0-9]{1,4})?%?", fullmatch=True).filter(
    lambda s: not re.fullmatch(r"0+(\.0+)?%?", s))  # a literal zero divisor is rejected on purpose (see below)
LEAVES = st.one_of(NUM_TOKENS, LITERALS).map(lambda s: [s])
OPS = st.sampled_from("+-*/^")


def _trees(depth: int):
    """Token lists of random expression trees; each level adds at most one nesting level."""
    if depth == 0:
        return LEAVES
    sub = _trees(depth - 1)
    return st.one_of(
        LEAVES,
        st.tuples(sub, OPS, sub).map(lambda t: t[0] + [t[1]] + t[2]),
        sub.map(lambda e: ["("] + e + [")"]),
        sub.map(lambda e: ["-"] + e),
    )


EXPRESSIONS = _trees(5)
LOOKALIKE = {"-": ["-", "\u2212", "\u2013"], "*": ["*", "\u00d7", "\u2217"], "/": ["/", "\u00f7"]}


@st.composite
def written_equations(draw):
    """(source string, expected symbols): `x = expr` or `expr = x`, spacing and operator glyphs varied."""
    expr = draw(EXPRESSIONS)
    unknown = draw(st.sampled_from(["x", "X"]))
    tokens = [unknown, "="] + expr if draw(st.booleans()) else expr + ["=", unknown]
    glyphs = [draw(st.sampled_from(LOOKALIKE[t])) if t in LOOKALIKE else t for t in tokens]
    seps = draw(st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=len(glyphs), max_size=len(glyphs)))
    source = "".join(g + s for g, s in zip(glyphs, seps))
    return source, ["x", "="] + expr


@SETTINGS
@given(written_equations())
def test_well_formed_equations_are_read_and_round_trip(case):
    source, expected = case
    symbols = normalize_equation(source)
    assert symbols == expected
    assert normalize_equation(equation_string(symbols)) == symbols


# --- hostile input: only EquationError, and whatever is accepted round-trips -----------------------------

def _read_or_reason(source):
    """The reason of the EquationError, or None after checking the accepted result round-trips."""
    try:
        symbols = normalize_equation(source)
    except EquationError as e:
        assert e.reason in REASONS and e.detail and e.reason in str(e)
        return e.reason
    assert symbols[:2] == ["x", "="]
    assert normalize_equation(equation_string(symbols)) == symbols
    return None


EQUATION_ALPHABET = st.sampled_from(list("0123456789.+-*/^()[]=%xXenum_ \t") + [
    "num1", "num2", "1e5", "2E-3", "\u2212", "\u2013", "\u2014", "\u00d7", "\u00f7", "\u2217", "\u00b7", "\u00b2",
    "\u207b", "\u00bd", "\uff08", "\uff09", "\u200b", "\u0663", "\u5343"])


@SETTINGS
@given(st.lists(EQUATION_ALPHABET, max_size=80).map("".join))
def test_equation_like_text_raises_only_equation_error(source):
    _read_or_reason(source)


@SETTINGS
@given(st.text(st.characters(codec=None, categories=None, exclude_categories=()), max_size=300))
def test_arbitrary_unicode_raises_only_equation_error(source):
    _read_or_reason(source)
    try:
        tokenize(source)
    except EquationError:
        pass


@st.composite
def damaged_equations(draw):
    """A well-formed equation truncated, with a symbol dropped, or with a stray piece inserted."""
    source, _ = draw(written_equations())
    how = draw(st.sampled_from(["truncate", "drop", "insert", "unbalance"]))
    i = draw(st.integers(0, len(source)))
    if how == "truncate":
        return source[:i]
    if how == "drop":
        return source[:i] + source[i + 1:]
    if how == "insert":
        return source[:i] + draw(EQUATION_ALPHABET) + source[i:]
    return source[:i] + draw(st.sampled_from(["(", ")", "[", "]"])) + source[i:]


@SETTINGS
@given(damaged_equations())
def test_damaged_equations_raise_only_equation_error(source):
    _read_or_reason(source)


@SETTINGS
@given(st.integers(0, 240), st.sampled_from(["parens", "signs", "mixed"]))
def test_nesting_is_bounded_with_its_own_reason(n, kind):
    if kind == "parens":
        source, depth = "x=" + "(" * n + "1" + ")" * n, n
    elif kind == "signs":
        source, depth = "x=" + "-" * (2 * n) + "1", 2 * n
    else:
        source, depth = "x=" + "-(" * n + "1" + ")" * n, 2 * n
    reason = _read_or_reason(source)
    if depth > MAX_DEPTH:
        assert reason in ("too_deep", "too_long")  # 2n signs and parens may also pass the symbol limit
    else:
        assert reason is None


@SETTINGS
@given(st.integers(1, 20_000), st.sampled_from(["1+", "(", "-", " ", "9", "\u00bd", "num12*"]))
def test_very_long_inputs_raise_only_equation_error(n, piece):
    source = "x=" + piece * (n // len(piece) + 1)
    reason = _read_or_reason(source)
    assert reason is not None or len(source) <= 1000


@SETTINGS
@given(st.one_of(damaged_equations(), st.lists(EQUATION_ALPHABET, max_size=60).map("".join)))
def test_masking_raises_only_its_own_errors(source):
    text = "Tom has 3 apples and 0.5 kg of pears , 20 % off , ( 1 / 2 ) left ."
    try:
        mask_problem(text, source)
    except (EquationError, MaskingError):
        pass


@pytest.mark.parametrize("equation, reason", [
    ("x=" + "(" * 200 + "1" + ")" * 200, "too_deep"),
    ("x=" + "-" * 2000 + "1", "too_long"),
    ("x=" + "-" * 60 + "1", "too_deep"),
    ("x=" + "1+" * 400 + "1", "too_long"),
    ("x = 3 / 0", "division_by_zero"),
], ids=["200-parens", "2000-minuses", "60-minuses", "801-symbols", "divide-by-0"])
def test_hostile_equations_are_quarantined_not_raised(equation, reason):
    problems = [RawProblem("mawps", "1", "Tom has 3 apples .", equation),
                RawProblem("mawps", "2", "Tom has 3 apples .", "x=3")]
    records, quarantined = preprocess_problems(problems)
    assert [r["id"] for r in records] == ["2"]
    assert [(q["id"], q["reason"]) for q in quarantined] == [("1", reason)]
