"""Raw problems -> number-masked records, with quarantine, and the paper's Table 1 statistics.

Every input ends up in exactly one of `records` (rows of `data/processed/<dataset>.jsonl`) or `quarantined`
(rows of `data/quarantine/<dataset>.jsonl`); nothing is dropped silently. Formats: docs/architecture.md.

Table 1 of Wang et al. (2021) reports #MWPs, average words per MWP and average symbols per equation.
* #MWPs is the raw count (the paper's counts equal the raw files' record counts: 1,492 / 2,373 / 23,162);
  `kept` and `quarantined_by_reason` say what the models actually see.
* Words are the whitespace tokens of the masked, punctuation-split text, punctuation included. Counting
  punctuation matches the paper far better (Arithmetic 26.96 with raw whitespace tokens vs 29.93 with
  punctuation split off, paper 29.89); a masked number (`num3`, also a whole fraction or `20 %`) is one word.
  Splitting clitics too (`' s`) gives Arithmetic 30.05 / MAWPS 31.22: no better overall, so `'s` stays one token.
* Symbols are the masked equation's symbols, `x` and `=` included (Table 1's example `x = ( 70 - 27 )`).
* Averages are over the kept records. The paper evidently averaged over all raw problems: MAWPS's raw
  equations, the 19 `unknown_inside` ones included, average 8.16 symbols (ours over kept: 8.10).

Measured with DEFAULT_CONSTANTS (kept / quarantined; words; symbols; paper in brackets):
  arithmetic  1492 / 0   29.93 (29.89)  8.05 (8.05)
  mawps       2326 / 47  31.10 (31.25)  8.10 (8.16)   19 unknown_inside, 27 unmatched_number, 1 unparsable
  math23k    23069 / 93  35.22 (35.23)  8.87 (8.78)   91 unmatched_number, 2 unparsable
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mwpgen import paper
from mwpgen.data.equations import EquationError, canonical_equation
from mwpgen.data.masking import DEFAULT_CONSTANTS, MaskingError, mask_problem
from mwpgen.data.raw import RawProblem

PAPER_TABLE1 = paper.TABLE1  # shown beside our statistics


# The reference English Math23K writes 28万 (wan, 10**4) as 280000 and 1.2亿 (yi, 10**8) as
# "120 1000000", while the Chinese equation keeps the wan/yi unit (x=28/2): 358 problems (1.5%) need this.
DATASET_SCALES: dict[str, tuple[int, ...]] = {"math23k": (10**4, 10**8)}


def _quarantine(p: RawProblem, reason: str, detail: str) -> dict:
    return {"id": p.id, "dataset": p.dataset, "reason": reason, "detail": detail,
            "source_text": p.text, "source_equation": p.equation}


def preprocess_problems(problems: Iterable[RawProblem], constants=DEFAULT_CONSTANTS,
                        scales: dict[str, tuple[int, ...]] | None = None) -> tuple[list[dict], list[dict]]:
    """Mask each problem; return (processed records, quarantined rows), in input order.

    `scales` maps a dataset to the unit factors its text may have multiplied out (default DATASET_SCALES).
    """
    scales = DATASET_SCALES if scales is None else scales
    records, quarantined = [], []
    seen: set[tuple[str, str]] = set()
    for p in problems:
        if (p.dataset, p.id) in seen:  # ids key the splits, so a repeated id would corrupt them
            quarantined.append(_quarantine(p, "duplicate_id", f"id {p.id} occurs more than once"))
            continue
        seen.add((p.dataset, p.id))
        if not p.text.strip():
            quarantined.append(_quarantine(p, "empty_text", "the problem text is empty"))
            continue
        try:
            m = mask_problem(p.text, p.equation, constants, scales.get(p.dataset, ()))
        except (EquationError, MaskingError) as e:
            quarantined.append(_quarantine(p, e.reason, e.detail))
            continue
        # Every stage trains on and compares the canonical form; Table 1 counts the symbols as written.
        records.append({"id": p.id, "dataset": p.dataset, "text": m.text, "equation": canonical_equation(m.equation),
                        "equation_as_written": m.equation, "numbers": m.numbers, "source_text": p.text,
                        "source_equation": p.equation})
    return records, quarantined


def dataset_stats(records: list[dict], n_raw: int, quarantined: list[dict] | None = None) -> dict:
    """Table 1 figures over the kept records, plus counts. `n_raw` is the count before quarantine."""
    n = len(records)
    stats = {
        "mwps": n_raw,
        "kept": n,
        "quarantined": n_raw - n,
        "avg_words": round(sum(len(r["text"].split()) for r in records) / n, 2) if n else 0.0,
        "avg_symbols": round(sum(len(r["equation_as_written"].split()) for r in records) / n, 2) if n else 0.0,
    }
    if quarantined is not None:
        stats["quarantined_by_reason"] = dict(sorted(Counter(q["reason"] for q in quarantined).items()))
    return stats


def compare_with_paper(dataset: str, stats: dict) -> dict:
    """Measured figures beside the paper's Table 1 row."""
    paper = PAPER_TABLE1[dataset]
    return {key: {"ours": stats[key], "paper": paper[key]} for key in paper}
