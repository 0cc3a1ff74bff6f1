"""How `mwpgen generate` writes problems: text (for reading), JSON or CSV, one request's block at a time."""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Sequence

# the later columns last: a reader of the earlier files may take columns by position
CSV_COLUMNS = ("request", "rank", "given", "equation", "context", "text", "verified", "parsed_equation", "answer",
               "numbers", "log_likelihood", "masked_text", "judge_probability", "judge_threshold", "verified_note")
FORMATS = ("text", "json", "csv")


def against_threshold(p: float, threshold: float, accepted: bool) -> str:
    """"0.62 < 0.71": p and the threshold to the fewest decimals (2 to 4) at which they differ as printed. The sign is
    the verdict's (`accepted`, reached on the unrounded p), never a comparison of rounded figures."""
    for digits in (2, 3, 4):
        shown, bar = f"{p:.{digits}f}", f"{threshold:.{digits}f}"
        if shown != bar:
            break
    return f"{shown} {'>=' if accepted else '<'} {bar}"


def verdict_text(p) -> str:
    """The text format's "verified:" line for problem `p` (mwpgen.generate.service.Problem)."""
    word = "yes" if p.verified else "NO"
    if p.judge_probability is not None and p.judge_threshold is None:
        return f"{word} (p = {p.judge_probability:.2f}, learned judge; its shape is never verified)"
    if p.judge_probability is not None and p.parsed_equation is not None:
        # a judge gated by the rule: a NO may be the rule's, so p and the threshold are shown without a verdict sign
        checked = ", numbers and question checked" if p.verified else ""
        return (f"{word} (learned judge gated by the rule: the co-trained mwp2eq reads {p.parsed_equation!r}"
                f"{checked}; p = {p.judge_probability:.2f}, threshold {p.judge_threshold:.2f})")
    if p.judge_probability is not None:
        return f"{word} (p = {against_threshold(p.judge_probability, p.judge_threshold, p.verified)}, learned judge)"
    return (f"{word} (judge: the co-trained mwp2eq reads {p.parsed_equation!r}; numbers and question checked)")


def text_problem(p) -> str:
    numbers = ", ".join(f"{k} = {v}" for k, v in p.numbers.items())
    # verify 0: no check, no verdict; no shown problem verified: why, once per request
    verdict = f"  verified: {verdict_text(p)}\n" if p.verified is not None else ""
    note = f"  {p.verified_note}\n" if p.verified_note and p.rank == 1 else ""
    return (f"[request {p.request + 1}, problem {p.rank}] {p.given}  | context: {p.context}\n"
            f"{p.text}\n"
            f"{verdict}{note}"
            f"  answer: {'x = ' + p.answer if p.answer is not None else 'unknown until num tokens have values'}"
            f"{'  (' + numbers + ')' if numbers else ''}  | log-likelihood per token: {p.log_likelihood:.3f}")


def csv_rows(problems: Sequence) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    for p in problems:
        writer.writerow(p.record() | {"numbers": " ".join(f"{k}={v}" for k, v in p.numbers.items())})
    return buf.getvalue()


class Format:
    """One output format written request by request: `start`, a `block` per request (`first`: no problem was
    written before it), then `end`; the pieces join into what one write of all the problems would be."""

    def __init__(self, name: str):
        self.name = name

    def start(self) -> str:
        return {"text": "", "json": "[\n", "csv": ",".join(CSV_COLUMNS) + "\n"}[self.name]

    def block(self, problems: Sequence, first: bool) -> str:
        if not problems:
            return ""
        if self.name == "csv":
            return csv_rows(problems)
        if self.name == "json":
            items = [textwrap.indent(json.dumps(p.record(), indent=2, ensure_ascii=False), "  ") for p in problems]
            return ("" if first else ",\n") + ",\n".join(items)
        return ("" if first else "\n") + "\n\n".join(text_problem(p) for p in problems) + "\n"

    def end(self, any_written: bool) -> str:
        return ("\n]\n" if any_written else "]\n") if self.name == "json" else ""
