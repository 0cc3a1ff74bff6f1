"""Tiny blind reading sets on disk, laid out as data/labels holds them (mwpgen/judge/readings.py's SETS), for tests of
the judge's stages: right problems say "gets num2 more", wrong ones "gives num2 away", so a judge can learn them."""

from __future__ import annotations

from pathlib import Path

from mwpgen.judge.readings import CORPORA, LABELS, SETS

OBJECTS = ("apples", "pens", "cards", "shells", "coins", "books", "cups", "hats", "keys", "rocks", "toys", "bags",
           "cars", "dolls", "eggs", "figs")
EQUATION = "x = num1 + num2"


def problem(right: bool, obj: str, i: int) -> str:
    verb = "gets num2 more" if right else "gives num2 away"
    return f"Tom has num1 {obj} and {verb} on day{i} . How many {obj} now ?"


def _write(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")


def write_reading_sets(root: Path, per_part: int = 8, right_in_train: int | None = None,
                       flipped: tuple[str, ...] = ()) -> list[str]:
    """Every set of SETS under root/data/labels, `per_part` readings of each of the set's parts, half read right
    (the corpora's train parts: `right_in_train` of them when given); the labels of the parts named in `flipped`
    ("validation", "test") are read the other way. Returns every problem text (a tiny model's
    vocabulary)."""
    texts = []
    # each set's number names its objects and uids; the later corpora are numbered last, so that the sets read before
    # they came keep theirs (and the tiny judge's separable readings)
    ordered = sorted(SETS, key=lambda s: s.name in CORPORA[1:])
    # the later corpora write of the second one's objects: the tiny judge learns "more" against "away", not one
    # more object (whose random features a probe this small does not average out)
    later = OBJECTS[[s.name for s in ordered].index(CORPORA[1])]
    for n, spec in enumerate(ordered):
        obj = later if spec.name in CORPORA[1:] else OBJECTS[n % len(OBJECTS)]
        folder = root / LABELS / spec.name
        parts = {"judge": ("validation", "test"), "verify_pools": ("validation", "test")}.get(
            spec.name, ("train",) if spec.name in CORPORA else ("test",))
        problems, key, labels = [], [], []
        for part in parts:
            right = right_in_train if part == "train" and right_in_train is not None else per_part // 2
            for i in range(per_part):
                uid = f"{spec.name[:1]}{n}{part[:1]}{i:03d}"
                text = problem(i < right, obj, 100 * n + 10 * parts.index(part) + i)
                texts.append(text)
                problems.append(f"{uid},{EQUATION},{text}")
                group = f"{n}{part[:1]}{i // 2}"  # two candidates per dataset problem
                key.append(f"{uid},{part},{group}")
                labels.append(f"{uid},{int((i < right) != (part in flipped))}")
        _write(folder / "problems.csv", "uid,equation,problem", problems)
        if spec.name == "judge":
            _write(folder / "sources.csv", "uid,part,dataset_id", key)
            for k, name in enumerate("abcd"):  # four readers, a quarter each
                _write(folder / f"labels_{name}.csv", "uid,label,note", [f"{r}," for r in labels[k::4]])
        else:
            _write(folder / "key.csv", "uid,split,id", key)
            first = "labels/batch_01.csv" if spec.name in CORPORA else "labels_a.csv"
            _write(folder / first, "uid,label", labels)
    return texts
