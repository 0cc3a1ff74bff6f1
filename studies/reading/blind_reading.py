"""Blind reading sets: generated problems shown to readers with nothing but their equation, and the labels joined
back. Shared by studies/verify_k/read_verify_k.py (what verified generation shows) and
studies/read_models/read_models.py (two models on the same test problems).

A set lives in one folder:
- `problems.csv`: uid, equation, problem: all a reader sees (no model, K, parse or verdict), shuffled by a seeded draw;
  each distinct (equation, problem) once;
- `key.csv`: uid -> every source row that showed that text (its model / K, test id, verdicts);
- `overlap.csv`: the seeded uids a second reader labels independently.
Readers label by the rule of data/labels/evaluator/README.md into `labels_<reader>.csv` (uid,label); the first
reading covers every uid, `labels_overlap.csv` the overlap. A folder that holds labels is never built again
(`refuse_if_read`): a new build renumbers the problems, and the labels would then describe texts nobody read.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

SEED = 2021
OVERLAP = 50


def rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, records: list[dict], columns: list[str]) -> None:
    """`records`' `columns` as a CSV, written whole or not at all (a stopped writer leaves the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows({k: r[k] for k in columns} for r in records)
    tmp.replace(path)


def refuse_if_read(folder: Path) -> None:
    """Stop, naming the folder and its label files, when `folder` already holds readings (labels_*.csv): building a
    set there again would give its uids to other problems, so that the labels no longer match what was read."""
    read = sorted(p.name for p in folder.glob("labels_*.csv")) if folder.is_dir() else []
    if read:
        raise SystemExit(f"error: {folder} already holds readings ({', '.join(read)}); building a blind set there "
                         "again would renumber its problems under those labels. Build into a new folder (or move "
                         "the readings away first if they are to be thrown away)")


def build(out: Path, shown: list[dict], key_columns: list[str], prefix: str = "r") -> None:
    """`shown`: source rows with "equation", "generated" and `key_columns`. Writes the set's three files (never over
    a set that has been read: refuse_if_read)."""
    refuse_if_read(out)
    distinct: dict[tuple[str, str], list[dict]] = {}
    for r in shown:
        distinct.setdefault((r["equation"], r["generated"]), []).append(r)
    pairs = sorted(distinct)
    random.Random(SEED).shuffle(pairs)
    out.mkdir(parents=True, exist_ok=True)
    problems, key = [], []
    for n, (equation, text) in enumerate(pairs, start=1):
        uid = f"{prefix}{n:04d}"
        problems.append({"uid": uid, "equation": equation, "problem": text})
        key += [{"uid": uid, **{k: r[k] for k in key_columns}} for r in distinct[(equation, text)]]
    write_rows(out / "problems.csv", problems, ["uid", "equation", "problem"])
    write_rows(out / "key.csv", key, ["uid", *key_columns])
    overlap = sorted(random.Random(SEED + 1).sample([p["uid"] for p in problems], min(OVERLAP, len(problems))))
    write_rows(out / "overlap.csv", [{"uid": u} for u in overlap], ["uid"])
    print(f"{len(problems)} distinct problems of {len(shown)} shown; overlap {len(overlap)} -> {out}")


def labels(out: Path) -> tuple[list[dict], dict[str, int], dict[str, int]]:
    """(key rows, first reading uid -> 0/1, second reading of the overlap). Exits naming a problem left unlabelled,
    or the file and line of a label that is not 0 or 1."""
    def read(path: Path) -> dict[str, int]:
        out = {}
        for line, r in enumerate(rows(path), start=2):  # line 1 is the header
            if r["label"] not in ("0", "1"):
                raise SystemExit(f"{path}:{line}: label must be 0 or 1, got {r['label']!r}")
            out[r["uid"]] = int(r["label"])
        return out

    first: dict[str, int] = {}
    for path in sorted(out.glob("labels_*.csv")):
        if path.name != "labels_overlap.csv":
            first |= read(path)
    key = rows(out / "key.csv")
    missing = sorted({r["uid"] for r in key} - set(first))
    if missing:
        raise SystemExit(f"{out}: {len(missing)} problems have no label yet (first: {missing[0]})")
    second = read(out / "labels_overlap.csv") if (out / "labels_overlap.csv").exists() else {}
    return key, first, second


def write_report(out: Path, result: dict, lines: list[str]) -> dict:
    """`reading.json` (the figures) and `reading.md` (the table) in the set's folder; the table is printed."""
    (out / "reading.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "reading.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return result
