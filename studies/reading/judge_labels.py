"""Blind labels for the consistency judge (issue 23): which generated problems encode their equation, by reading.

    python -m studies.reading.judge_labels build     # data/labels/judge/problems.csv (what readers see) + sources.csv
    python -m studies.reading.judge_labels agreement # the two readings of the overlap, compared -> agreement.json

`build` pools committed generated problems, shuffles them by a seeded draw and writes two files:
- `problems.csv`: uid, equation, problem -- all a reader sees: no model, decoding, K, parse or verdict;
- `sources.csv`: uid -> part, where the problem came from (file, model / K, the dataset id).

The part follows the rule that keeps the test labels clean: problems written for VALIDATION equations (the 100-problem
validation slice of Arithmetic fold 0) are the validation part, the only labels a judge may be trained or tuned on;
problems written for TEST equations are the test part, which only measures. Readers label by the rule of
data/labels/evaluator/README.md into `labels_<reader>.csv` (uid,label); `overlap.csv` lists the seeded 50 problems
(25 of each part) that a second reader labels independently.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

from mwpgen.judge.readings import first_reading, read_csv, reading_set
from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "data" / "labels" / "judge"
SEED = 2021
TEST_SAMPLE = 300  # of the verify_k rows (test equations, K = 1 and K = 8 problems)
OVERLAP = 25  # per part
SECOND_READING = "labels_e.csv"  # the overlap, read again by a fifth reader who saw no other label
PARTS = ("validation", "test")


def pool() -> list[dict]:
    """Every candidate problem with its part and source, identical (equation, text) pairs once."""
    found: dict[tuple[str, str], dict] = {}
    for path in sorted((ROOT / "studies" / "decoding_choice").glob("generations_*.csv")):
        model, decoding = path.stem.removeprefix("generations_").rsplit("_", 1)
        for r in read_csv(path):
            found.setdefault((r["equation"], r["generated"]), {
                "part": "validation", "equation": r["equation"], "problem": r["generated"], "source": path.name,
                "model": model, "setting": decoding, "dataset_id": r["id"]})
    test = read_csv(ROOT / "studies" / "verify_k" / "verify_k_generations.csv")
    random.Random(SEED).shuffle(test)
    taken = 0
    for r in test:
        if taken >= TEST_SAMPLE:
            break
        if (r["equation"], r["generated"]) in found:
            continue
        taken += 1
        found[(r["equation"], r["generated"])] = {
            "part": "test", "equation": r["equation"], "problem": r["generated"], "source": "verify_k_generations.csv",
            "model": "ours", "setting": f"k={r['k']}", "dataset_id": r["id"]}
    return list(found.values())


def build() -> None:
    blind_reading.refuse_if_read(OUT)  # data/labels/judge has been read: a new draw would renumber its problems
    rows = pool()
    random.Random(SEED + 1).shuffle(rows)
    for i, r in enumerate(rows, start=1):
        r["uid"] = f"p{i:04d}"
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "problems.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["uid", "equation", "problem"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with open(OUT / "sources.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["uid", "part", "source", "model", "setting", "dataset_id"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    overlap = []
    for part in PARTS:
        uids = [r["uid"] for r in rows if r["part"] == part]
        overlap += sorted(random.Random(SEED + 2).sample(uids, OVERLAP))
    (OUT / "overlap.csv").write_text("uid\n" + "\n".join(overlap) + "\n", encoding="utf-8")
    counts = {p: sum(r["part"] == p for r in rows) for p in PARTS}
    print(json.dumps({"problems": len(rows), **counts, "overlap": len(overlap)}))


def labels() -> list[dict]:
    """Every problem with its part and its (first-reading) label: what the judge is fitted and measured on."""
    return reading_set("judge").read(ROOT)


def agreement() -> dict:
    """Cohen's kappa and raw agreement of the two readings of the overlap."""
    _, _, *first = reading_set("judge").files(ROOT)
    a = {uid: label for uid, (label, _) in first_reading(first).items()}
    b = {uid: label for uid, (label, _) in first_reading([OUT / SECOND_READING]).items()}
    both = sorted(set(a) & set(b))
    n = len(both)
    agree = sum(a[u] == b[u] for u in both)
    pa, pb = sum(a[u] for u in both) / n, sum(b[u] for u in both) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    kappa = (agree / n - expected) / (1 - expected) if expected < 1 else 1.0
    disagreements = [u for u in both if a[u] != b[u]]
    return {"n": n, "agree": agree, "agreement": agree / n, "kappa": kappa, "positive_a": pa, "positive_b": pb,
            "disagreements": disagreements}


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = cli.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    sub.add_parser("agreement")
    args = cli.parse_args()
    if args.cmd == "build":
        build()
    else:
        result = agreement()
        rows = labels()
        result["labels"] = {part: {"n": sum(r["part"] == part for r in rows),
                                   "consistent": sum(r["label"] for r in rows if r["part"] == part)}
                            for part in PARTS}
        (OUT / "agreement.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
