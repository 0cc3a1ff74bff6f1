"""One sample per test equation at the service's settings (top-p 0.9, T = 1), read blind: how often is it right?

    python -m studies.verify_k.verify_k models/ours-rft/arithmetic/fold0 --dataset arithmetic --fold 0 --k 1 \
        --first 100 --judge models/judge/arithmetic/fold0 --out studies/verify_k/ours_rft3_k1
    python -m studies.tuning.score_sample_test studies/tuning/sample_test

<set>/problems.csv (uid, equation, problem: the first 100 rows of that run's verify_k_generations.csv, shuffled, seed
0), <set>/key.csv (uid, test id, K), the readers' <set>/labels_*.csv (uid, label, note) and a second reading of a
seeded 20 in <set>/labels_overlap.csv. Prints and writes <set>/reading.json: the share read right with a 95 %
bootstrap interval over the equations, by shape, and the overlap's agreement. Test equations: this only measures.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from studies.reading.blind_reading import rows as read
from studies.reading.corpus import shape
from studies.tuning.compare_validation import paired_interval


def labels(path: Path) -> dict[str, int]:
    out = {}
    for line, row in enumerate(read(path), start=2):
        if row["label"] not in ("0", "1"):
            raise SystemExit(f"{path}:{line}: label must be 0 or 1, got {row['label']!r}")
        out[row["uid"]] = int(row["label"])
    return out


def score(folder: Path) -> dict:
    problems = {r["uid"]: r for r in read(folder / "problems.csv")}
    first: dict[str, int] = {}
    for path in sorted(folder.glob("labels_*.csv")):
        if path.name != "labels_overlap.csv":
            first |= labels(path)
    missing = sorted(set(problems) - set(first))
    if missing:
        raise SystemExit(f"{folder}: {len(missing)} problems not read (e.g. {missing[0]})")
    y = [first[u] for u in problems]
    low, high = paired_interval(y)  # the bootstrap of a mean, here of one model's 0/1 readings
    by_shape = collections.defaultdict(list)
    for u, p in problems.items():
        by_shape[shape(p["equation"])].append(first[u])
    again = labels(folder / "labels_overlap.csv")
    return {"n": len(y), "right": sum(y), "share": round(sum(y) / len(y), 3),
            "interval_95": [round(low, 3), round(high, 3)],
            "by_shape": {s: f"{sum(v)} of {len(v)}" for s, v in sorted(by_shape.items())},
            "overlap": {"n": len(again), "agree": sum(again[u] == first[u] for u in again)}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    folder = ap.parse_args(argv).folder
    result = score(folder)
    (folder / "reading.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
