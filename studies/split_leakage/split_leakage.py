"""How many test problems a split that ignores duplicate texts would leak into training (issue 26, MAWPS).

    bash scripts/run.sh python -m studies.split_leakage.split_leakage --dataset mawps --seeds 5

The split stage keeps problems whose normalised texts are identical (mwpgen.data.splits.duplicate_groups) in one
fold, so no test text is also a training text (Arithmetic keeps Roy & Roth's published folds; metrics/splits.json
counts their duplicates across folds). This counts the problems that share their text with another, then,
for `--seeds` shuffles of an ungrouped 5-fold split (the first fifth as the test fold), the share of test problems
whose text is also in the training fold: what a generator that copies its training problems would be rewarded for.
"""

import argparse
import collections
import random
from pathlib import Path

from mwpgen.data.splits import duplicate_groups
from mwpgen.io import read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="mawps", choices=["arithmetic", "mawps", "math23k"])
    parser.add_argument("--seeds", type=int, default=5, help="shuffles of the ungrouped split")
    args = parser.parse_args()
    records = read_jsonl(ROOT / "data" / "processed" / f"{args.dataset}.jsonl")
    groups = duplicate_groups(records)
    group_of = {rid: k for k, group in enumerate(groups) for rid in group}
    shared = sum(len(g) for g in groups if len(g) > 1)
    n = len(records)
    print(f"{args.dataset}: {n} problems, {len(groups)} distinct normalised texts; {shared} problems "
          f"({shared / n:.1%}) share their text with another")
    ids = [str(r["id"]) for r in records]
    leaks = []
    for seed in range(args.seeds):
        order = ids[:]
        random.Random(seed).shuffle(order)
        test, train = order[: n // 5], order[n // 5:]
        train_groups = collections.Counter(group_of[rid] for rid in train)
        leaks.append(sum(train_groups[group_of[rid]] > 0 for rid in test) / len(test))
    print("an ungrouped 5-fold split: test problems whose text is also in the training fold, per seed: "
          + ", ".join(f"{x:.1%}" for x in leaks))


if __name__ == "__main__":
    main()
