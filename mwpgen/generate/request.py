"""A generation request from untrusted input (a command line, a CSV / JSONL file, an HTTP body): read and check it,
mask its numbers for the model, and put numbers back into what the model wrote.

One module for the CLI, the MLflow model and the bench, so that every bad input ends the same way: one
RequestError naming the field and what is wrong (the CLI prints it and exits 2; the server answers 400), never a
traceback.

Decisions:
* Equation: read by mwpgen.data.equations.normalize_equation (so unicode `−`, `×`, `÷` and full-width forms are
  folded, as everywhere in the project), and the unknown must be `x`. Two forms:
  - masked, `x = num1 - num2`: used as written; a literal number is allowed only if it is one of preprocessing's
    declared constants (1, 2, 3.14, 0.01, 100, 12, 7: `x = num1 * 100`), as in the training data;
  - with numbers, `x = 12 - 5`: EVERY number becomes a token, num1, num2, ... in order of first appearance in the
    equation, equal values sharing one (`5` and `5.0`, as masking does), and is written back into the generated
    text as the user wrote it. No constant is kept in this form: a number you write is one the problem states.
  An equation has at most MAX_SYMBOLS symbols (the longest in the three datasets has 97), the one symbol limit
  every message names (the reader's own, MAX_SYMBOLS of mwpgen.data.equations, is looser). Its value is computed
  by mwpgen.generate.arithmetic, within a size bound (a power of a power of a power would exhaust memory).
* Context: keywords as a list or one space-separated string; at least one and at most MAX_CONTEXT_WORDS words.
  NFKC plus accent folding (`café` -> `cafe`); anything still outside printable ASCII is refused by name, as the
  models were trained on English text. A word needs a letter (numbers belong in the equation).
* `numbers = auto` (masked equations only): distinct integers in AUTO_RANGE per token, seeded, such that x is a
  positive whole number (exact Fraction arithmetic); after AUTO_TRIES draws it gives up with a message.
* Number tokens the model writes that the equation does not use (distractors, e.g. num3) get a seeded integer
  from AUTO_RANGE not used by another token.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from mwpgen.data.equations import MAX_CHARS as MAX_EQUATION_CHARS
from mwpgen.data.equations import (
    EquationError,
    canonical_equation,
    is_num_token,
    is_number,
    is_variable,
    normalize_equation,
    tokenize,
)
from mwpgen.data.masking import DEFAULT_CONSTANTS, number_value
from mwpgen.data.masking import format_number as decimal_string
from mwpgen.generate import arithmetic

MAX_SYMBOLS = 100
MAX_CONTEXT_WORDS = 30
MAX_WORD_CHARS = 40
MAX_N = 20
MAX_VERIFY = 64
MAX_NUMBER_TEXT = 40  # characters of a number field written as text; every field's range is far shorter
AUTO_RANGE = range(2, 21)  # 1 is a declared constant (the complement), so it is never drawn
AUTO_TRIES = 1000
MAX_AUTO_ANSWER = 10**6
# Sampling divides the logits by the temperature: far below this they overflow to inf and the probabilities to NaN
# (1e-300 did); 0.01 already samples the most likely token almost always (decoding greedy is the exact form).
MIN_TEMPERATURE = 0.01
MAX_REQUEST_FILE_BYTES = 64 * 2**20  # a request file is read whole and checked before any model loads
DECODINGS = ("top_p", "greedy", "beam")
NUMBER_MODES = ("given", "auto")
_NUM_TOKEN_IN_TEXT = re.compile(r"(?<![A-Za-z0-9_])num(\d+)(?![A-Za-z0-9_])")
# What fill_numbers fills: also a token the generator glued to the word before it ("basketnum1": no space token
# between them), filled with the space put back ("basket 12")
_NUM_TOKEN_TO_FILL = re.compile(r"(?<![0-9_])num(\d+)(?![A-Za-z0-9_])")
_CONSTANTS = {Fraction(c) for c in DEFAULT_CONSTANTS}


class RequestError(ValueError):
    """A request the service cannot answer; `field` names the input, the message says what is wrong."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


@dataclass(frozen=True)
class Request:
    equation: str  # masked and canonical: what the model reads ("x = num1 - num2")
    context: tuple[str, ...]
    given: str = ""  # the equation as written
    values: dict[str, str] = field(default_factory=dict)  # numK -> the number as written, for `x = 12 - 5`
    numbers: str = "given"  # "given" | "auto"
    n: int = 1
    seed: int = 0
    verify: int = 0  # candidates to sample and check; 0 = no verification, n samples
    decoding: str = "top_p"
    top_p: float = 0.9
    temperature: float = 1.0
    num_beams: int = 4
    max_new_tokens: int = 80

    @property
    def candidates(self) -> int:
        return max(self.verify, self.n)


FIELDS = tuple(f for f in Request.__dataclass_fields__ if f not in ("given", "values"))


# ---------------------------------------------------------------------------------------------- reading fields

def _missing(value: Any) -> bool:
    """None or a blank string (a CSV's empty cell). NaN is NOT missing: a NaN the user gave (`--top-p nan`, a JSON
    NaN) is refused by the field's check; pandas' NaN for an empty cell is turned into None where a DataFrame is
    read (tracking/pyfunc_model.py)."""
    if value is None:
        return True
    return isinstance(value, str) and not value.strip()


def _number(name: str, value: Any, kind: type, lo: float, hi: float, lo_open: bool = False):
    """An int or float field from JSON, CSV or command-line text or a numpy scalar; bools, NaN, infinities,
    fractional counts and out-of-range values are refused by the field's name, however long the number."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar (a pandas cell)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RequestError(name, f"expected a number, got {_show(value)}")
    if isinstance(value, str) and len(value.strip()) > MAX_NUMBER_TEXT:
        raise RequestError(name, f"a number of {len(value.strip())} characters is out of range "
                           f"({_range(lo, hi, lo_open)})")
    number = _text_number(name, value) if isinstance(value, str) else value
    if isinstance(number, float) and not math.isfinite(number):
        raise RequestError(name, f"expected a finite number, got {_show(value)}")
    if kind is int and number != int(number):
        raise RequestError(name, f"expected a whole number, got {_show(value)}")
    if number < lo or number > hi or (lo_open and number == lo):  # exact for any int, however long
        raise RequestError(name, f"{_show_number(kind, number)} is out of range ({_range(lo, hi, lo_open)})")
    return kind(number)


def _range(lo: float, hi: float, lo_open: bool) -> str:
    return f"{'>' if lo_open else '>='} {lo:g} and <= {int(hi) if float(hi).is_integer() else hi}"


def _text_number(name: str, text: str) -> int | float:
    """An int for integer text (`12`, `-3`), else a float (`0.5`, `1e3`, `nan`). The caller refuses a long one by
    its length first: int() of 5,000 digits raises Python's 4300-digit limit and float() of 400 is infinite."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise RequestError(name, f"expected a number, got {_show(text)}") from None


def _show_number(kind: type, number: int | float) -> str:
    """The number as the field holds it (`0.0` for a float field), or its length for a huge int (str() of one
    over 4300 digits raises, and a message of 400 digits helps nobody)."""
    if isinstance(number, int) and abs(number) >= 10**MAX_NUMBER_TEXT:
        return f"a number of about {int(number.bit_length() * 0.30103) + 1} digits"
    return str(kind(number))


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in allowed:
        raise RequestError(name, f"expected one of {', '.join(allowed)}, got {_show(value)}")
    return text


def _show(value: Any) -> str:
    if isinstance(value, int) and abs(value) >= 10**MAX_NUMBER_TEXT:
        return _show_number(int, value)
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + f"... ({len(str(value))} characters)"


def _describe_char(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"{char!r} (U+{ord(char):04X}{' ' + name if name else ''})"


def read_equation(value: Any) -> tuple[str, dict[str, str]]:
    """(masked canonical equation, {numK: number as written}) for an equation in either form."""
    if _missing(value):
        raise RequestError("equation", "is empty; write one like 'x = num1 - num2' or 'x = 12 - 5'")
    if not isinstance(value, str):
        raise RequestError("equation", f"expected text, got {_show(value)}")
    if len(value) > MAX_EQUATION_CHARS:
        raise RequestError("equation", f"has {len(value)} characters (limit {MAX_EQUATION_CHARS}; and at most "
                           f"{MAX_SYMBOLS} symbols)")
    try:
        symbols = normalize_equation(value)
        unknown = next(s for s in tokenize(value) if is_variable(s))
    except EquationError as e:
        if e.reason == "too_long" and not e.detail.startswith("number"):  # the reader's own, looser symbol limit
            raise RequestError("equation", f"has more than {MAX_SYMBOLS} symbols (limit {MAX_SYMBOLS})") from None
        raise RequestError("equation", e.detail) from None
    if unknown.lower() != "x":
        raise RequestError("equation", f"the unknown must be x, got {unknown!r} in {_show(value)}")
    if len(symbols) > MAX_SYMBOLS:
        raise RequestError("equation", f"has {len(symbols)} symbols (limit {MAX_SYMBOLS})")
    literals = [s for s in symbols[2:] if is_number(s)]
    if any(is_num_token(s) for s in symbols):
        stray = [s for s in literals if number_value(s) not in _CONSTANTS]
        if stray:
            raise RequestError("equation", f"mixes number tokens with the number {stray[0]}: write every number "
                               "(x = 12 - 5) or mask every one that is not a declared constant "
                               f"({', '.join(DEFAULT_CONSTANTS)})")
        return canonical_equation(" ".join(symbols)), {}
    token_of: dict[Fraction, str] = {}
    values: dict[str, str] = {}
    masked = []
    for s in symbols:
        if is_number(s):
            v = number_value(s)
            if v not in token_of:
                token_of[v] = f"num{len(token_of) + 1}"
                values[token_of[v]] = s
            s = token_of[v]
        masked.append(s)
    try:
        arithmetic.value(masked, {k: number_value(v) for k, v in values.items()})
    except arithmetic.Undefined:
        raise RequestError("equation", f"{_show(value.strip())} has no value (division by zero, or a power that is "
                           f"not a whole number up to {arithmetic.MAX_EXPONENT})") from None
    except arithmetic.TooLarge as e:
        raise RequestError("equation", f"{_show(value.strip())} is too large to compute: {e} (limit "
                           f"{arithmetic.MAX_VALUE_DIGITS} digits for every value on the way)") from None
    return canonical_equation(" ".join(masked)), values


def read_context(value: Any) -> tuple[str, ...]:
    """Keywords from a list or a space-separated string, folded to ASCII and checked."""
    if _missing(value):
        words: list[str] = []
    elif isinstance(value, str):
        words = value.split()
    elif isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else list(value)
        if not all(isinstance(w, str) for w in items):
            raise RequestError("context", f"expected words (text), got {_show(items)}")
        words = [w for item in items for w in item.split()]
    else:
        raise RequestError("context", f"expected keywords as text or a list, got {_show(value)}")
    if not words:
        raise RequestError("context", "is empty; give one or more keywords, e.g. 'candies jar'")
    if len(words) > MAX_CONTEXT_WORDS:
        raise RequestError("context", f"has {len(words)} words (limit {MAX_CONTEXT_WORDS})")
    return tuple(_read_word(w) for w in words)


def _read_word(word: str) -> str:
    folded = "".join(c for c in unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", word))
                     if not unicodedata.combining(c))
    bad = next((c for c in folded if not (c.isascii() and c.isprintable())), None)
    if bad is not None:
        raise RequestError("context", f"word {_show(word)} has the character {_describe_char(bad)}; the model was "
                           "trained on English (ASCII) text")
    if len(folded) > MAX_WORD_CHARS:
        raise RequestError("context", f"word {_show(word)} has {len(folded)} characters (limit {MAX_WORD_CHARS})")
    if not any(c.isalpha() for c in folded):
        raise RequestError("context", f"word {folded!r} has no letter; numbers belong in the equation")
    if is_num_token(folded.lower()):
        raise RequestError("context", f"word {folded!r} is a number token; numbers belong in the equation")
    return folded


def parse_request(raw: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Request:
    """A checked Request from one record (`raw` wins over `defaults`; missing or blank values take the default)."""
    if not isinstance(raw, Mapping):
        raise RequestError("request", f"expected an object with an equation and a context, got {_show(raw)}")
    unknown = sorted(set(raw) - set(FIELDS), key=str)
    if unknown:
        raise RequestError(str(unknown[0]), f"unknown field; known: {', '.join(FIELDS)}")
    merged = {k: v for k, v in (defaults or {}).items() if not _missing(v)}
    merged |= {k: v for k, v in raw.items() if not _missing(v)}
    equation, values = read_equation(merged.get("equation"))
    out: dict[str, Any] = {"equation": equation, "given": str(merged["equation"]).strip(), "values": values,
                           "context": read_context(merged.get("context"))}
    limits = {"n": (int, 1, MAX_N, False), "seed": (int, 0, 2**32 - 1, False),
              "verify": (int, 0, MAX_VERIFY, False), "num_beams": (int, 1, 16, False),
              "max_new_tokens": (int, 1, 256, False), "temperature": (float, MIN_TEMPERATURE, 10, False),
              "top_p": (float, 0, 1, True)}  # (kind, lowest, highest, lowest excluded)
    for name, (kind, lo, hi, lo_open) in limits.items():
        if name in merged:
            out[name] = _number(name, merged[name], kind, lo, hi, lo_open=lo_open)
    if "decoding" in merged:
        out["decoding"] = _choice("decoding", merged["decoding"], DECODINGS)
    if "numbers" in merged:
        out["numbers"] = _choice("numbers", merged["numbers"], NUMBER_MODES)
    request = Request(**out)
    if request.numbers == "auto" and values:
        raise RequestError("numbers", "auto draws the numbers of a masked equation (x = num1 - num2); this one "
                           "already has its numbers")
    if request.numbers == "auto":
        auto_numbers(request.equation, request.seed)  # fail now, not after generating
    if request.verify and request.decoding != "top_p":
        raise RequestError("verify", "needs sampled candidates: use decoding top_p")
    if request.verify and request.verify < request.n:
        raise RequestError("verify", f"samples {request.verify} candidates, fewer than the n = {request.n} problems "
                           "asked for")
    if request.decoding != "top_p" and request.n > 1:
        raise RequestError("n", f"{request.decoding} decoding writes one problem; use decoding top_p for n > 1")
    return request


# ---------------------------------------------------------------------------------------------- request files

def read_request_file(path: str | Path) -> list[tuple[str, dict]]:
    """[(where, record)] from a CSV (a header row with `equation`, `context`, ...) or a JSONL file (one object
    per line); `where` is `file line k` for messages. Raises RequestError for an unreadable file."""
    path = Path(path)
    if path.is_dir():
        raise RequestError("input", f"{path} is a directory; give a request file (.csv or .jsonl)")
    kind = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}.get(path.suffix.lower())
    if kind is None:
        raise RequestError("input", f"{path}: unknown request file type {path.suffix!r} (use .csv or .jsonl)")
    data = _read_bounded(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise RequestError("input", f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") \
            from None
    records = list(_csv_records(path, text) if kind == "csv" else _jsonl_records(path, text))
    if not records:
        raise RequestError("input", f"{path} has no requests")
    return records


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, at most MAX_REQUEST_FILE_BYTES: a huge or endless file (a link to /dev/zero) is refused
    after reading one byte past the limit, never read whole."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REQUEST_FILE_BYTES + 1)
    except OSError as e:
        raise RequestError("input", f"{path}: {e.strerror or e}") from None
    if len(data) > MAX_REQUEST_FILE_BYTES:
        limit = MAX_REQUEST_FILE_BYTES
        size = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
        raise RequestError("input", f"{path} is larger than {size} (the limit of a request file, read whole before "
                           "any model loads); split it")
    return data


def _csv_records(path: Path, text: str) -> Iterator[tuple[str, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or "equation" not in [f.strip() for f in reader.fieldnames]:
        raise RequestError("input", f"{path}: the first row must name the columns, with 'equation' among them")
    first: dict[str, int] = {}
    for i, name in enumerate((f.strip() for f in reader.fieldnames), start=1):
        if name in first:  # csv.DictReader would keep the last such cell of every row, silently
            raise RequestError("input", f"{path}: column {name!r} is named twice in the first row (columns "
                               f"{first[name]} and {i}); keep one")
        first[name] = i
    for row in reader:
        where = f"{path.name} line {reader.line_num}"
        if None in row:
            raise RequestError("input", f"{where}: more cells than columns")
        record = {k.strip(): v for k, v in row.items() if not _missing(v)}
        if record:
            yield where, record


class DuplicateKey(ValueError):
    """A JSON object with a key given twice (`key`)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json.loads' object hook: a key given twice is an error (json.loads alone keeps the last, silently), as a
    column named twice in a CSV is."""
    record: dict = {}
    for key, value in pairs:
        if key in record:
            raise DuplicateKey(key)
        record[key] = value
    return record


def read_json(text: str, max_int_chars: int = MAX_NUMBER_TEXT) -> Any:
    """JSON holding requests (a request file's line, a served call's body). An integer longer than `max_int_chars`
    stays text, which the field's check refuses by name (int() of over 4300 digits raises a ValueError that names
    nothing). Raises json.JSONDecodeError, DuplicateKey for a key given twice, and RecursionError for nesting deeper
    than the parser reads (one Python call per bracket: 100,000 brackets exhaust the stack); each caller names
    where."""
    return json.loads(text, object_pairs_hook=_unique_keys,
                      parse_int=lambda digits: int(digits) if len(digits) <= max_int_chars else digits)


def _jsonl_records(path: Path, text: str) -> Iterator[tuple[str, dict]]:
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {i}"
        try:
            record = read_json(line)
        except json.JSONDecodeError as e:
            raise RequestError("input", f"{where}: not JSON ({e.msg} at column {e.colno})") from None
        except DuplicateKey as e:
            raise RequestError("input", f"{where}: key {e.key!r} is given twice in one object; keep one") from None
        except RecursionError:
            raise RequestError("input", f"{where}: nested too deeply to read (a request is one flat object)") \
                from None
        if not isinstance(record, dict):
            raise RequestError("input", f"{where}: expected a JSON object, got {type(record).__name__}")
        yield where, record


# ---------------------------------------------------------------------------------------------- numbers

def evaluate(equation: str, values: Mapping[str, Fraction | int]) -> Fraction | None:
    """x of a masked equation for the token values, exactly; None when undefined (division by zero, a power that
    is not a whole number up to 64, a token without a value, an unreadable equation) or too large to compute
    (mwpgen.generate.arithmetic)."""
    try:
        return arithmetic.value(normalize_equation(equation), values)
    except (EquationError, arithmetic.Undefined, arithmetic.TooLarge):
        return None


def auto_numbers(equation: str, seed: int) -> dict[str, int]:
    """Distinct small integers per number token such that x is a positive whole number (seeded)."""
    tokens = sorted(set(_NUM_TOKEN_IN_TEXT.findall(equation)), key=int)
    names = [f"num{t}" for t in tokens]
    if len(names) > len(AUTO_RANGE):
        raise RequestError("numbers", f"auto draws at most {len(AUTO_RANGE)} numbers; this equation has {len(names)}")
    symbols = normalize_equation(equation)
    rng = random.Random(seed)
    misses: dict[str, int] = {}  # why each draw failed, to name the real cause if every one does
    for _ in range(AUTO_TRIES):
        values = dict(zip(names, rng.sample(AUTO_RANGE, len(names))))
        try:
            x = arithmetic.value(symbols, values)
        except arithmetic.Undefined:
            misses["undefined"] = misses.get("undefined", 0) + 1
            continue
        except arithmetic.TooLarge:
            misses["too large"] = misses.get("too large", 0) + 1
            continue
        if 0 < x <= MAX_AUTO_ANSWER and x.denominator == 1:
            return values
        miss = "not positive" if x <= 0 else "not whole" if x.denominator != 1 else "too large"
        misses[miss] = misses.get(miss, 0) + 1
    raise RequestError("numbers", _no_draw_message(equation, misses))


def _no_draw_message(equation: str, misses: Mapping[str, int]) -> str:
    """Why --numbers auto found no numbers, by the cause of the failed draws: an equation with no value for any
    numbers (a division by num2 - num2) is not helped by writing numbers in, and an answer above the cap names it."""
    if set(misses) == {"undefined"}:
        return (f"x in {equation!r} has no value for any of {AUTO_TRIES} draws (a division by zero, such as by "
                "num2 - num2, whatever the numbers, or a power that is not a whole number); correct the equation")
    if set(misses) == {"too large"}:
        return (f"x in {equation!r} is above {MAX_AUTO_ANSWER:,}, the largest answer --numbers auto gives, for every "
                f"one of {AUTO_TRIES} draws of distinct integers {AUTO_RANGE.start}..{AUTO_RANGE.stop - 1}; write the "
                "numbers into the equation instead (x = 12 - 5)")
    causes = ", ".join(f"{n} {why}" for why, n in sorted(misses.items(), key=lambda kv: -kv[1]))
    return (f"no distinct integers {AUTO_RANGE.start}..{AUTO_RANGE.stop - 1} make x in {equation!r} a positive whole "
            f"number up to {MAX_AUTO_ANSWER:,} ({AUTO_TRIES} tries: x was {causes}); write the numbers into the "
            "equation instead (x = 12 - 5)")


def format_number(value: Fraction) -> str:
    """7, 2.5, 0.125 (exact decimals); a value without a short exact decimal as `1/3`."""
    d = value.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return decimal_string(value) if d == 1 and value.denominator <= 10**6 else f"{value.numerator}/{value.denominator}"


def fill_numbers(masked_text: str, values: Mapping[str, str], seed: int) -> tuple[str, dict[str, str]]:
    """The text with every numK token replaced by its number, and the numbers used (distractor tokens the
    equation does not name get a seeded integer not used by another token)."""
    values = dict(values)
    used = {number_value(v) for v in values.values()}
    rng = random.Random(seed)
    for k in sorted(set(_NUM_TOKEN_TO_FILL.findall(masked_text)), key=int):
        if f"num{k}" not in values:
            free = [v for v in AUTO_RANGE if Fraction(v) not in used] or list(AUTO_RANGE)
            values[f"num{k}"] = str(rng.choice(free))
            used.add(Fraction(values[f"num{k}"]))

    def number(m: re.Match) -> str:
        glued = m.start() > 0 and masked_text[m.start() - 1].isalpha()
        return (" " if glued else "") + values[f"num{m.group(1)}"]

    text = _NUM_TOKEN_TO_FILL.sub(number, masked_text)
    return text, {k: values[k] for k in sorted(values, key=lambda t: int(t[3:]))}


def detokenize(text: str) -> str:
    """The datasets' tokenised text (`beach .`, `$ 91`, `Tom 's`) as ordinary text, for display."""
    text = re.sub(r"\s+([.,?!;:%)])", r"\1", text)
    text = re.sub(r"([($])\s+", r"\1", text)
    return re.sub(r"\s+('s|n't|'re|'ll|'ve|'d|'m)\b", r"\1", text)
