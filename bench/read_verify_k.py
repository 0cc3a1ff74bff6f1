"""Blind reading of the problems verified generation shows (bench/verify_k.py): how often is a shown problem right,
and how often is "verified: yes" right, per K?

    python bench/read_verify_k.py build docs/verify_judge   # <dir>/reading/problems.csv (what readers see) + key
    python bench/read_verify_k.py score docs/verify_judge   # labels -> <dir>/reading/reading.{json,md}

`build` takes <dir>/verify_k_generations.csv, keeps each distinct (equation, problem) once (the same text chosen at
two K is read once), shuffles them by a seeded draw and writes
- `problems.csv`: uid, equation, problem: all a reader sees (no K, verdict, parse or model);
- `key.csv`: uid -> every (K, test id, verified, judged by the evaluator's parse) that showed it;
- `overlap.csv`: the seeded 50 uids a second reader labels independently.
Readers label by the rule of docs/evaluator_labels/README.md into `labels_<reader>.csv` (uid,label); the first
reading covers every uid, `labels_overlap.csv` the overlap. These problems were written for TEST equations: they
only measure, nothing is tuned on them.

`score` reports, per K: the share of shown problems a reader finds right (with a 95% bootstrap interval over the
test problems), the share the service's judge verified and how often a "verified: yes" is right (its precision),
the same for the judge with the evaluator's parse, and the agreement of the two readings of the overlap.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

import numpy as np

SEED = 2021
OVERLAP = 50
RESAMPLES = 1000


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows({k: r[k] for k in columns} for r in rows)


def build(folder: Path) -> None:
    shown = _rows(folder / "verify_k_generations.csv")
    distinct: dict[tuple[str, str], list[dict]] = {}
    for r in shown:
        distinct.setdefault((r["equation"], r["generated"]), []).append(r)
    pairs = sorted(distinct)
    random.Random(SEED).shuffle(pairs)
    out = folder / "reading"
    out.mkdir(parents=True, exist_ok=True)
    problems, key = [], []
    for n, (equation, text) in enumerate(pairs, start=1):
        uid = f"r{n:04d}"
        problems.append({"uid": uid, "equation": equation, "problem": text})
        key += [{"uid": uid, "k": r["k"], "id": r["id"], "verified": r["verified"],
                 "judged_by_evaluator": r["judged_by_evaluator"]} for r in distinct[(equation, text)]]
    _write(out / "problems.csv", problems, ["uid", "equation", "problem"])
    _write(out / "key.csv", key, ["uid", "k", "id", "verified", "judged_by_evaluator"])
    overlap = sorted(random.Random(SEED + 1).sample([p["uid"] for p in problems], min(OVERLAP, len(problems))))
    _write(out / "overlap.csv", [{"uid": u} for u in overlap], ["uid"])
    print(f"{len(problems)} distinct problems of {len(shown)} shown; overlap {len(overlap)} -> {out}")


def _labels(path: Path) -> dict[str, int]:
    return {r["uid"]: int(r["label"]) for r in _rows(path)}


def _precision(flags: list[bool], read: list[int]) -> dict:
    accepted = [y for f, y in zip(flags, read) if f]
    return {"accepted": len(accepted), "right": int(sum(accepted)),
            "precision": sum(accepted) / len(accepted) if accepted else None}


def score(folder: Path) -> dict:
    out = folder / "reading"
    first = {}
    for path in sorted(out.glob("labels_*.csv")):
        if path.name != "labels_overlap.csv":
            first |= _labels(path)
    key = _rows(out / "key.csv")
    missing = sorted({r["uid"] for r in key} - set(first))
    if missing:
        raise SystemExit(f"{out}: {len(missing)} problems have no label yet (first: {missing[0]})")
    second = _labels(out / "labels_overlap.csv") if (out / "labels_overlap.csv").exists() else {}
    agree = sum(first[u] == y for u, y in second.items())
    rng = np.random.default_rng(SEED)
    per_k = {}
    for k in sorted({int(r["k"]) for r in key}):
        rows = sorted((r for r in key if int(r["k"]) == k), key=lambda r: r["id"])
        read = np.array([first[r["uid"]] for r in rows])
        boot = read[rng.integers(0, len(read), size=(RESAMPLES, len(read)))].mean(axis=1)
        verified = [r["verified"] == "True" for r in rows]
        per_k[k] = {"shown": len(rows), "read_right": float(read.mean()),
                    "read_right_95ci": [float(x) for x in np.percentile(boot, [2.5, 97.5])],
                    "verified_share": sum(verified) / len(rows),
                    "verified": _precision(verified, read.tolist()),
                    "judged_by_evaluator": _precision([r["judged_by_evaluator"] == "True" for r in rows],
                                                      read.tolist())}
    result = {"problems_read": len(first), "overlap": len(second), "overlap_agree": agree, "per_k": per_k}
    (out / "reading.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}"  # noqa: E731
    lines = [f"Blind reading of the problems verified generation showed ({len(first)} distinct problems; the two "
             f"readings of the {len(second)}-problem overlap agree on {agree}).", "",
             "| K | shown | read right (%) [95% CI] | verified (%) | verified: yes right (%) | judge with the "
             "evaluator's parse: accepted, right (%) |", "|---:|---:|---:|---:|---:|---:|"]
    for k, r in per_k.items():
        lo, hi = r["read_right_95ci"]
        v, e = r["verified"], r["judged_by_evaluator"]
        lines.append(f"| {k} | {r['shown']} | {pct(r['read_right'])} [{pct(lo)}, {pct(hi)}] | "
                     f"{pct(r['verified_share'])} | {pct(v['precision'])} ({v['right']} of {v['accepted']}) | "
                     f"{e['accepted']}, {pct(e['precision'])} |")
    (out / "reading.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return result


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("command", choices=("build", "score"))
    cli.add_argument("folder", type=Path, help="verify_k.py's --out folder")
    args = cli.parse_args()
    build(args.folder) if args.command == "build" else score(args.folder)


if __name__ == "__main__":
    main()
