"""Number masking (Zhou & Huang 2019, as used by Wang et al. 2021, Sec. 4 "Datasets").

Every number in the problem text becomes `num1`, `num2`, ... and the same tokens replace those numbers in the
equation. Decisions (measured on the raw files; see preprocess.py for the resulting quarantine counts):

* Order: tokens are numbered by FIRST APPEARANCE IN THE TEXT, as the paper and Zhou & Huang do. The reference
  templates in math23k_en/template_v1 number by equation order instead; we deliberately do not follow them.
* Identity is the exact value (fractions.Fraction of the written decimal): `70.0` and `70` share a token,
  as do `50 %` and `0.5`. `numbers` keeps the surface of the first occurrence (inner spaces removed).
* Text tokenisation: NFKC (folds full-width `（ ）`), then words, numbers and single punctuation marks;
  `beach.` -> `beach .`, `$91` -> `$ 91`, `8th` -> `8 th`, `60kph` -> `60 kph`. Tokens that start with a
  letter stay words even when they hold digits (`mp3`, MAWPS's anonymiser artefacts `w8`, `h8`, `H1`).
  A clitic `'s` stays one token. `1,250` (thousands groups of exactly 3 digits) is one number, 1250.
  A leading `-` glued to digits and preceded by a space or `(` makes a negative number (MAWPS: `-11`).
* Fractions: `( 1 / 6 )` (Math23K's English) and `1/6` in the text are ONE number; in the equation the
  five symbols `( 1 / 6 )` (or `1 / 6` where precedence allows) become that number's single token only when
  the text has a fraction of that value; otherwise `/` stays a division (Arithmetic's `(70.0/7.0)`, Math23K's
  `540/(360/8)`). One-token fractions and percents reproduce the paper's Math23K word average (35.23; five
  tokens per fraction gives 36.8). Collapsing EVERY `(a/b)` would give its 8.78 symbols, but `(360/8)` is a
  division of two text numbers, so we keep it as one and get 8.87.
  Mixed numbers (`3(1/2)`): none occur; the English "9 ( 1 / 18 )" means "9 of (1/18)", i.e. two numbers.
* Percentages: `20%` and `20 %` in the text are one number of value 0.2, matching an equation `20%`
  (Math23K) or `0.2`. MAWPS instead writes `3 %` as `3.0*0.01`; when the equation uses the bare 3 and
  never the value 0.03, the text number is split back into `numK %` with numK = 3, so that every numK means
  one value in both text and equation.
* A unary minus before an equation number is folded into it when the text has that negative number
  (MAWPS `1.477/-7.0` with text `-7`); otherwise it stays an operator.
* Math23K's reference translation multiplies out Chinese units: 28万 (wan, 10**4) -> "280000", 350万 ->
  "3.5 1000000" (N million, kept as one number), while the Chinese equation keeps `x=28/2`. With `scales`,
  an equation number v absent from the text matches a text number v*scale (358 Math23K problems).
* Constants: an equation number absent from the text is kept as a literal, written normalised (`1` not
  `1.0`), only when its value is in the declared `constants`.
* Number words (`five`, `eighth`, `tripled`, `half`, `quarters`) are masked only to rescue an equation number
  that nothing above explains, so problems written with digits are unaffected. Anything still unexplained
  raises `unmatched_number` naming the number.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from mwpgen.data.equations import OPERATORS, is_number, normalize_equation

# Measured on the raw data: (problems using it in Arithmetic / MAWPS / Math23K; extra quarantined without it)
#   1     complement / whole ("1-20%", unit of work):  0 / 61 / 4856;  +61 / +4856
#   2     doubling, halving, perimeter:                0 / 8 / 323;     +7 / +9 (the rest say "twice")
#   3.14  pi:                                          0 / 0 / 238;     +238
#   0.01  MAWPS writes "3 %" as 3.0*0.01:              0 / 67 / 0;      +67
#   100   percent as a number ("*100.0"):              0 / 12 / 0;      +12
#   12    dozen, months per year:                      0 / 21 / 2;      +21 / +2
#   7     days per week:                               0 / 5 / 8;       +5 / +2
# Arithmetic needs none. Not kept: 60 and 1000 (rescue 1 and 0 problems); 3 and 4 would rescue ~20 and ~15,
# but they are counts (of listed names, "tripled"), not constants: left quarantined as unmatched_number.
DEFAULT_CONSTANTS: tuple[str, ...] = ("1", "2", "3.14", "0.01", "100", "12", "7")


class MaskingError(ValueError):
    """The equation cannot be expressed with the text's numbers and the declared constants."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class TextNumber:
    surface: str  # as written, inner spaces removed: "1,250", "20%", "(1/6)", "-11"
    value: Fraction
    kind: str  # "plain" | "percent" | "fraction" | "word"
    raw: Fraction  # the written number before the percent scaling (== value unless kind == "percent")


_NUM = r"\d+(?:\.\d+)?"
_TEXT_RE = re.compile(
    rf"(?P<frac>\(\s*{_NUM}\s*/\s*{_NUM}\s*\)|(?<![\d/]){_NUM}/{_NUM}(?![\d/]))"
    rf"|(?P<num>(?:(?<![^\s(])-)?(?:\d{{1,3}}(?:,\d{{3}})+(?!\d)(?:\.\d+)?|{_NUM}))"
    r"(?:(?P<pct>\s*%)|\s+(?P<scale>1000000|1000000000)(?![\d.,]))?"
    r"|(?P<word>[^\W\d_]\w*(?:(?<=\d)\.\d+)?|'[^\W\d_]+)"
    r"|(?P<punct>\S)"
)


MAX_TEXT_NUMBER_CHARS = 100  # the real data's longest is far shorter; Python refuses to convert > 4,300 digits


def _value(number: str) -> Fraction:
    if len(number) > MAX_TEXT_NUMBER_CHARS:
        raise MaskingError("number_too_long", f"a number in the text has {len(number)} characters "
                           f"(limit {MAX_TEXT_NUMBER_CHARS}): {number[:40]}...")
    return Fraction(number.replace(",", ""))


def tokenize_text(text: str) -> list[str | TextNumber]:
    """Words and punctuation as strings, numbers as TextNumber."""
    text = " ".join(unicodedata.normalize("NFKC", text).split())
    items: list[str | TextNumber] = []
    for m in _TEXT_RE.finditer(text):
        if m.group("frac"):
            num, den = re.findall(_NUM, m.group("frac"))
            surface = "".join(m.group("frac").split())
            if Fraction(den) == 0:  # "(1/0)" is not a number: keep its pieces
                pieces = [TextNumber(num, Fraction(num), "plain", Fraction(num)), "/",
                          TextNumber(den, Fraction(den), "plain", Fraction(den))]
                items += ["(", *pieces, ")"] if surface.startswith("(") else pieces
                continue
            value = Fraction(num) / Fraction(den)
            items.append(TextNumber(surface, value, "fraction", value))
        elif m.group("num"):
            raw = _value(m.group("num"))
            if m.group("scale"):
                value = raw * int(m.group("scale"))
                items.append(TextNumber(f'{m.group("num")} {m.group("scale")}', value, "plain", value))
            elif m.group("pct"):
                items.append(TextNumber(m.group("num") + "%", raw / 100, "percent", raw))
            else:
                items.append(TextNumber(m.group("num"), raw, "plain", raw))
        else:
            items.append(m.group(0))
    return items


def split_text(text: str) -> list[str]:
    """Whitespace tokens of the punctuation-split, unmasked text."""
    return " ".join(t if isinstance(t, str) else t.surface for t in tokenize_text(text)).split()


def format_number(value: Fraction) -> str:
    """Shortest plain decimal for a constant: 1 not 1.0, 0.01 not 1e-2."""
    if value.denominator == 1:
        return str(value.numerator)
    d = (Decimal(value.numerator) / Decimal(value.denominator)).normalize()
    return format(d, "f")


def number_value(symbol: str) -> Fraction:
    """The exact value of a number symbol of an equation (`50%` is 1/2)."""
    return Fraction(symbol[:-1]) / 100 if symbol.endswith("%") else Fraction(symbol)


def _fraction_at(symbols: list[str], i: int) -> tuple[Fraction, int] | None:
    """A literal fraction starting at i: `( a / b )`, or bare `a / b` where reading it as one number keeps
    the value (not after `/` or `^`, not before `^`). Returns (value, number of symbols) or None."""
    def plain(k: int) -> bool:
        return k < len(symbols) and is_number(symbols[k]) and not symbols[k].endswith("%")

    if symbols[i] == "(" and plain(i + 1) and symbols[i + 2:i + 3] == ["/"] and plain(i + 3) \
            and symbols[i + 4:i + 5] == [")"] and Fraction(symbols[i + 3]) != 0:
        return Fraction(symbols[i + 1]) / Fraction(symbols[i + 3]), 5
    prev = symbols[i - 1] if i > 0 else "="
    nxt = symbols[i + 3] if i + 3 < len(symbols) else None
    if plain(i) and symbols[i + 1:i + 2] == ["/"] and plain(i + 2) and prev not in ("/", "^") \
            and nxt != "^" and Fraction(symbols[i + 2]) != 0:
        return Fraction(symbols[i]) / Fraction(symbols[i + 2]), 3
    return None


def _split_unused_percents(items: list, eq_values: set[Fraction]) -> list:
    """MAWPS writes `3 %` as `3.0*0.01`: use the bare number when only it occurs in the equation."""
    out: list = []
    for it in items:
        if isinstance(it, TextNumber) and it.kind == "percent" and it.raw in eq_values \
                and it.value not in eq_values:
            out += [TextNumber(it.surface[:-1], it.raw, "plain", it.raw), "%"]
        else:
            out.append(it)
    return out


# Rescue only (see mask_problem): the translation often writes Math23K's "第5层" as "the fifth floor", and
# MAWPS says "five dollars bills", "tripled". Ambiguous words ("second" of time, "a third") are harmless here:
# a word is masked only when the equation needs its value and no digit or constant provides it.
NUMBER_WORDS = {w: Fraction(v) for v, ws in {
    2: "two second twice double doubled", 3: "three third triple tripled thrice", 4: "four fourth quadruple",
    5: "five fifth",
    6: "six sixth", 7: "seven seventh", 8: "eight eighth", 9: "nine ninth", 10: "ten tenth", 11: "eleven eleventh",
    12: "twelve twelfth", 15: "fifteen", 20: "twenty", 30: "thirty", 40: "forty", 50: "fifty",
    "1/2": "half halves", "1/4": "quarter quarters"}.items()
    for w in ws.split()}


def _mark_number_words(items: list, values: set[Fraction]) -> list:
    return [TextNumber(it, NUMBER_WORDS[it.lower()], "word", NUMBER_WORDS[it.lower()])
            if isinstance(it, str) and NUMBER_WORDS.get(it.lower()) in values else it for it in items]


@dataclass(frozen=True)
class Masked:
    text: str  # masked, space-joined tokens
    equation: str  # "x = ..." with numK tokens and constants
    numbers: list[str]  # surface of num1, num2, ...


class _Table:
    """numK tokens by value, numbered in order of first appearance in the text."""

    def __init__(self, items: list):
        self.token_of: dict[Fraction, str] = {}
        self.fractions: set[Fraction] = set()
        self.numbers: list[str] = []
        self.words: list[str] = []
        for it in items:
            if isinstance(it, str):
                self.words.append(it)
                continue
            if it.value not in self.token_of:
                self.numbers.append(it.surface)
                self.token_of[it.value] = f"num{len(self.numbers)}"
            if it.kind == "fraction":
                self.fractions.add(it.value)
            self.words.append(self.token_of[it.value])


def _mask_equation(symbols: list[str], table: _Table, const_values: set, scales) -> tuple[list[str], list[str]]:
    """Masked symbols and the equation numbers that nothing explains."""
    token_of = table.token_of
    out: list[str] = []
    unmatched: list[str] = []
    i = 0
    while i < len(symbols):
        s = symbols[i]
        frac = _fraction_at(symbols, i)
        if frac and frac[0] in table.fractions:
            out.append(token_of[frac[0]])
            i += frac[1]
            continue
        unary = s == "-" and (not out or out[-1] in OPERATORS or out[-1] in ("(", "="))
        if unary and i + 1 < len(symbols) and is_number(symbols[i + 1]) \
                and -number_value(symbols[i + 1]) in token_of:
            out.append(token_of[-number_value(symbols[i + 1])])
            i += 2
            continue
        if is_number(s):
            value = number_value(s)
            scaled = [value * k for k in scales if value * k in token_of]
            if value in token_of:
                out.append(token_of[value])
            # A scaled text match beats a constant (Math23K `x=28/2` with "20000 yuan": 2 is 2万), except for
            # 1, which is the complement in `x=10000/(1+25%)` (measured: 15 of the 16 such cases).
            elif scaled and value != 1:
                out.append(token_of[scaled[0]])
            elif value in const_values:
                out.append(format_number(value))
            else:
                unmatched.append(s)
                out.append(s)
        else:
            out.append(s)
        i += 1
    return out, unmatched


def mask_problem(text: str, equation: str, constants=DEFAULT_CONSTANTS, scales=()) -> Masked:
    """Mask numbers in text and equation. Raises EquationError (from normalize_equation) or MaskingError.

    `scales`: unit factors the text may have multiplied out (Math23K: 10**4 and 10**8, see module doc); an
    equation number v absent from the text then matches a text number equal to v * scale.
    Number words are masked only when the equation needs them, so digit-only problems are unaffected.
    """
    symbols = normalize_equation(equation)
    const_values = {Fraction(str(c)) for c in constants}
    eq_values = {number_value(s) for s in symbols if is_number(s)}
    items = _split_unused_percents(tokenize_text(text), eq_values)
    table = _Table(items)
    out, unmatched = _mask_equation(symbols, table, const_values, scales)
    if unmatched:
        table = _Table(_mark_number_words(items, {number_value(s) for s in unmatched}))
        out, unmatched = _mask_equation(symbols, table, const_values, scales)
    if unmatched:
        raise MaskingError("unmatched_number", f"equation number {unmatched[0]} is neither in the text nor a "
                           f"declared constant (all unmatched: {', '.join(unmatched)})")
    return Masked(" ".join(table.words), " ".join(out), table.numbers)
