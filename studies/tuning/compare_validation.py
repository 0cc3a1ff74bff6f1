"""The validation reading of the tuning study by model and source, each tuned model against ours on the same
equations (paired bootstrap over equations).

    python -m studies.tuning.compare_validation studies/tuning/validation --baseline ours

Reads <set>/key.csv and the first reading <set>/labels/batch_*.csv (studies/reading/corpus.py); writes
<set>/comparison.json and prints a table.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
from pathlib import Path

from studies.reading import blind_reading
from studies.reading.corpus import first_reading

RESAMPLES = 2000


def paired_interval(diffs: list[int], seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def compare(folder: Path, baseline: str) -> dict:
    read = first_reading(folder)
    by: dict[tuple[str, str], dict[str, int]] = collections.defaultdict(dict)
    for r in blind_reading.rows(folder / "key.csv"):
        if r["uid"] in read and r["sample"] == "0":  # one candidate per (model, source, equation)
            by[(r["model"], r["source"])][r["id"]] = read[r["uid"]]
    out = {}
    for (model, source), got in sorted(by.items()):
        row = {"n": len(got), "right": sum(got.values())}
        base = by.get((baseline, source), {})
        shared = sorted(set(got) & set(base))
        if model != baseline and shared:
            diffs = [got[i] - base[i] for i in shared]
            low, high = paired_interval(diffs)
            row["minus_baseline"] = {"n": len(shared), "mean": round(sum(diffs) / len(diffs), 4),
                                     "low": round(low, 4), "high": round(high, 4)}
        out[f"{model} {source}"] = row
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--baseline", default="ours")
    args = ap.parse_args(argv)
    result = compare(args.folder, args.baseline)
    (args.folder / "comparison.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print("| model, source | read right | minus baseline [95 % CI, paired] |\n|---|---:|---:|")
    for name, r in result.items():
        d = r.get("minus_baseline")
        diff = f"{100 * d['mean']:+.0f} [{100 * d['low']:+.0f}, {100 * d['high']:+.0f}]" if d else ""
        print(f"| {name} | {r['right']}/{r['n']} ({100 * r['right'] / r['n']:.0f} %) | {diff} |")


if __name__ == "__main__":
    main()
