"""Every blind reading of a generated problem the project holds, by part: `train` (training-fold equations: the
reading corpus), `validation` (the fold's validation slice: what a judge is chosen on) and `test` (test equations:
they only measure). A thin wrapper of the library's mwpgen/judge/readings.py (what the train_judge and measure_judge
stages read), which says where each part comes from.
"""

from __future__ import annotations

from pathlib import Path

from mwpgen.judge.readings import PARTS, readings

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["PARTS", "labelled"]


def labelled(part: str, root: Path = ROOT) -> list[dict]:
    """The part's readings, each distinct (equation, problem) once: {uid, part, equation, problem, label, group,
    source, where}."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, not {part!r}")
    return readings(root)[part]
