"""What a fold's judge folder holds (stage train_judge, FoldPaths.judge): a saved learned judge, described by its
judge.json (`JudgeInfo`), or no_judge.json saying why the fold has none, in which case whoever looks for the fold's
judge keeps the rule (mwpgen/judge/rule.py).

Reading these files needs no torch: `mwpgen generate` checks a judge folder before it loads any model.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

INFO_FILE = "judge.json"
HEAD_FILE = "head.pt"
# What train_judge leaves where it adopts no judge (no readings of the fold, or the rule judged validation as well):
# {"reason": ..., "figures": {...}}.
NO_JUDGE_FILE = "no_judge.json"


@dataclass
class JudgeInfo:
    """What a saved judge is: where its backbone came from, which layer it reads, its threshold and how it was
    measured (filled by whoever trains it)."""
    backbone: str
    layer: int
    threshold: float = 0.5
    trained_layers: int = 0  # decoder layers fine-tuned on the readings (0: a probe on frozen states)
    gated_by_rule: bool = False  # accepts only what the rule accepts (mwpgen/judge/verdicts.py)
    measured: dict = field(default_factory=dict)
    # the thresholds "verified: yes" is held to, per equation shape (mwpgen/judge/verified.py); {}: `threshold`
    verified: dict = field(default_factory=dict)


# what a judge's `verified` holds (mwpgen/judge/verified.py choose_verified), where it has one
VERIFIED_KEYS = ("precision_target", "min_accepted", "thresholds")
# JudgeInfo's fields and the JSON types each may hold (bool is not a number here: `"layer": true` is a mistake)
_INFO_TYPES = {"backbone": (str,), "layer": (int,), "threshold": (int, float), "trained_layers": (int,),
               "gated_by_rule": (bool,), "measured": (dict,), "verified": (dict,)}


def _json_object(path: Path) -> dict:
    """A judge folder's JSON file as a dict; unreadable, not JSON or not an object: one error naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{path}: not a readable JSON file ({e}); run its train_judge stage again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_info(folder: str | Path) -> JudgeInfo:
    """The JudgeInfo of the judge saved in `folder`; a missing, unknown or mistyped key is one error naming the file
    and the key."""
    path = Path(folder) / INFO_FILE
    data = _json_object(path)
    missing = [k for k in ("backbone", "layer") if k not in data]
    unknown = sorted(set(data) - set(_INFO_TYPES))
    if missing or unknown:
        raise ValueError(f"{path}: " + "; ".join(
            ([f"missing key(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_INFO_TYPES)})"] if unknown else [])))
    for key, value in data.items():
        if isinstance(value, bool) is not (_INFO_TYPES[key] == (bool,)) or not isinstance(value, _INFO_TYPES[key]):
            raise ValueError(f"{path}: key {key!r} must be {' or '.join(t.__name__ for t in _INFO_TYPES[key])}, "
                             f"got {value!r}")
    verified = data.get("verified", {})
    missing = [k for k in VERIFIED_KEYS if k not in verified] if verified else []
    if missing or not isinstance(verified.get("thresholds", {}), dict):
        raise ValueError(f"{path}: key 'verified' must hold {', '.join(VERIFIED_KEYS)} (thresholds a mapping of "
                         "shape to threshold or null); run its train_judge stage again")
    return JudgeInfo(**data)


def write_info(info: JudgeInfo, folder: Path) -> None:
    (folder / INFO_FILE).write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")


def no_judge_reason(folder: str | Path) -> str:
    """Why `folder` holds no judge: its NO_JUDGE_FILE's reason (a malformed one is an error naming it), else what is
    missing."""
    folder = Path(folder)
    path = folder / NO_JUDGE_FILE
    if not path.exists():
        return f"no {INFO_FILE} in {folder}" if folder.is_dir() else f"no such folder {folder}"
    reason = _json_object(path).get("reason")
    if not isinstance(reason, str):
        raise ValueError(f"{path}: key 'reason' must be a string saying why the fold has no judge, got {reason!r}")
    return reason


def has_judge(folder: str | Path) -> bool:
    """Whether `folder` holds a saved judge (a fold without readings gets only NO_JUDGE_FILE)."""
    return (Path(folder) / INFO_FILE).exists()


def save_no_judge(folder: str | Path, reason: str, figures: dict | None = None) -> Path:
    """The train_judge stage's output for a fold where it adopts no judge: a folder that says why (and the `figures`
    that decided it), so that the stages and the product that look for the fold's judge keep the rule
    (mwpgen/judge/rule.py)."""
    from mwpgen.io import atomic_directory

    record = {"reason": reason, **({"figures": figures} if figures else {})}
    with atomic_directory(Path(folder)) as tmp:
        (tmp / NO_JUDGE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return Path(folder)
