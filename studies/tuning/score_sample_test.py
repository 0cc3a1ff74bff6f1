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

from studies.reading.blind_reading import labels, rows
from studies.reading.corpus import shape
from studies.tuning.compare_validation import paired_interval


def score(folder: Path) -> dict:
    problems = {r["uid"]: r for r in rows(folder / "problems.csv")}
    _key, first, again = labels(folder)  # exits naming an unread problem or a label that is not 0/1
    y = [first[u] for u in problems]
    low, high = paired_interval(y)  # the bootstrap of a mean, here of one model's 0/1 readings
    by_shape = collections.defaultdict(list)
    for u, p in problems.items():
        by_shape[shape(p["equation"])].append(first[u])
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
