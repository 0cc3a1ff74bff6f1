"""Every blind reading of a generated problem the project holds, by part: `train` (training-fold equations: the
reading corpus), `validation` (the fold's validation slice: what a judge is chosen on) and `test` (test equations:
they only measure). Each problem is (equation, problem, label, source); a text read in two sets of the same part is
kept once, with the first set's label (data/labels/corpus first).
"""

from __future__ import annotations

from pathlib import Path

from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("train", "validation", "test")


def _first_reading(folder: Path, files: list[str]) -> dict[str, int]:
    labels: dict[str, int] = {}
    for name in files:
        for path in sorted(folder.glob(name)):
            labels |= {r["uid"]: int(r["label"]) for r in blind_reading.rows(path)}
    return labels


def _set(folder: Path, part_of: dict[str, str], labels: dict[str, int], source: str,
         problem_of: dict[str, str]) -> list[dict]:
    """`problem_of`: uid -> the dataset problem whose equation (and context) it was written for: candidates for one
    problem are one group, kept on one side of any split of the labels."""
    return [{"part": part_of[p["uid"]], "equation": p["equation"], "problem": p["problem"], "label": labels[p["uid"]],
             "source": source, "group": problem_of.get(p["uid"], p["uid"])}
            for p in blind_reading.rows(folder / "problems.csv") if p["uid"] in labels and p["uid"] in part_of]


def corpus(root: Path = ROOT) -> list[dict]:
    folder = root / "data" / "labels" / "corpus"
    if not (folder / "key.csv").exists():
        return []
    key = blind_reading.rows(folder / "key.csv")
    return _set(folder, {r["uid"]: r["split"] for r in key}, _first_reading(folder / "labels", ["batch_*.csv"]),
                "data/labels/corpus", {r["uid"]: r["id"] for r in key})


def judge_labels(root: Path = ROOT) -> list[dict]:
    """data/labels/judge: its dev part is validation equations, its test part test equations."""
    folder = root / "data" / "labels" / "judge"
    sources = blind_reading.rows(folder / "sources.csv")
    part_of = {r["uid"]: {"dev": "validation"}.get(r["part"], r["part"]) for r in sources}
    return _set(folder, part_of, _first_reading(folder, ["labels_[abcd].csv"]), "data/labels/judge",
                {r["uid"]: r["dataset_id"] for r in sources})


def verify_pools(root: Path = ROOT) -> list[dict]:
    folder = root / "studies" / "verify_pools" / "reading"
    key = blind_reading.rows(folder / "key.csv")
    return _set(folder, {r["uid"]: r["split"] for r in key}, _first_reading(folder, ["labels_a.csv"]),
                "studies/verify_pools", {r["uid"]: r["id"] for r in key})


def read_models(root: Path = ROOT) -> list[dict]:
    """studies/read_models: greedy problems of every model for the same 100 test equations."""
    out = []
    for folder in sorted(p.parent for p in (root / "studies" / "read_models").glob("*/problems.csv")):
        part_of = {p["uid"]: "test" for p in blind_reading.rows(folder / "problems.csv")}
        problem_of = {r["uid"]: r["id"] for r in blind_reading.rows(folder / "key.csv")} if (folder / "key.csv").exists() else {}
        out += _set(folder, part_of, _first_reading(folder, ["labels_a.csv", "labels_r[0-9].csv"]),
                    f"studies/read_models/{folder.name}", problem_of)
    return out


def verify_judge(root: Path = ROOT) -> list[dict]:
    """studies/verify_k/verify_judge: what `--verify K` showed for test equations."""
    folder = root / "studies" / "verify_k" / "verify_judge" / "reading"
    key = blind_reading.rows(folder / "key.csv")
    return _set(folder, {r["uid"]: "test" for r in key}, _first_reading(folder, ["labels_a.csv"]),
                "studies/verify_k/verify_judge", {r["uid"]: r.get("id", r["uid"]) for r in key})


def labelled(part: str, root: Path = ROOT) -> list[dict]:
    """The part's readings, each distinct (equation, problem) once. A text read in two parts (a generic problem
    written for a training and a validation equation alike) stays in the earliest of train, validation, test only:
    nothing a judge is fitted on is chosen or measured on."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, not {part!r}")
    rows = corpus(root) + judge_labels(root) + verify_pools(root) + read_models(root) + verify_judge(root)
    earlier = {(r["equation"], r["problem"]) for r in rows if PARTS.index(r["part"]) < PARTS.index(part)}
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        text = (r["equation"], r["problem"])
        if r["part"] == part and text not in seen and text not in earlier:
            seen.add(text)
            out.append(r)
    return out
