"""Every blind reading of a generated problem the project holds (data/labels/), by part: what a learned judge may
train on, be chosen on, and be measured on.

A reading is a generated problem a reader labelled by the rule of data/labels/evaluator/README.md (1: solving it as
written computes its equation) seeing only (equation, problem). Its part is that of the equation it was written for
on LABELLED_FOLD (every set was generated there):
- `train`: training-fold equations (data/labels/corpus; corpus_round2: the tuned ours' own candidates for 200
  more of them; corpus_round3: its candidates for 150 equations of the hard shapes, 11 each): a judge is fitted on
  these;
- `validation`: the fold's validation slice (data/labels/judge's validation part, data/labels/verify_pools'
  validation pools): what chooses a judge's threshold, layer or seed;
- `test`: test equations (data/labels/judge's test part, verify_pools' test pools, read_models, verify_judge): they
  only measure.

Each reading is {"uid", "part", "equation", "problem", "label", "group", "source", "where"}: `uid` is its problem's id
in its set (problems.csv); `group` is the dataset problem
id the candidate was written for (candidates of one problem share most of their text, so a split of the readings
keeps a group on one side); `source` the set's folder; `where` the label's file and line. Each distinct (equation,
problem) is kept once: within a part the first set's reading is kept (SETS' order: the corpus first), and a text read
in two parts is kept only in the earlier of train, validation, test, so no text a judge was fitted or chosen on is
ever measured. Two readings of one text in one part that disagree are not resolved silently: each such pair is
reported in one line naming both label files (a warning, or the caller's `on_conflict`) and the first is kept, since
either reading may be the mistake and dropping both would lose a text that a later reader settles.

Only the first reading of each set counts (the overlap's second reading, `second_reading`, measures agreement
between readers); a problem the readers
have not reached yet (a corpus batch being read) has no label and is left out. One error naming the file (and line
or column): a label other than 0 or 1, a label whose uid is not in the set's problems.csv, a file without a column
it needs.
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

LABELS = Path("data") / "labels"
PARTS = ("train", "validation", "test")
LABELLED_FOLD = ("arithmetic", 0)  # the (dataset, fold) every reading's problem was generated on


class LabelConflict(UserWarning):
    """Two readings of one (equation, problem) in one part disagree (the first is kept)."""


def read_csv(path: Path, columns: tuple[str, ...] = ()) -> list[dict]:
    """The CSV's rows; a missing file, or a header without one of `columns`, is one error naming the file."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file (a blind reading set needs it)")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(repr(c) for c in missing)} (its header: "
                             f"{', '.join(reader.fieldnames or ()) or 'none'})")
        return list(reader)


def first_reading(paths: list[Path], root: Path | None = None) -> dict[str, tuple[int, str]]:
    """uid -> (0/1, "file:line" of the label, the file relative to `root` when given) from label CSVs (uid, label[,
    note]); a later file does not overwrite an earlier uid."""
    labels: dict[str, tuple[int, str]] = {}
    for path in paths:
        name = path.relative_to(root) if root is not None and path.is_relative_to(root) else path
        for line, row in enumerate(read_csv(path, ("uid", "label")), start=2):
            if row.get("label") not in ("0", "1"):
                raise ValueError(f"{path}:{line}: label must be 0 or 1, got {row.get('label')!r} "
                                 f"(uid {row.get('uid')})")
            labels.setdefault(row["uid"], (int(row["label"]), f"{name}:{line}"))
    return labels


@dataclass(frozen=True)
class ReadingSet:
    """One blind reading set under data/labels: its problems, the files of its first reading, and from its key (or
    sources) file each uid's part and dataset problem."""
    name: str  # the folder under data/labels
    labels: tuple[str, ...]  # glob patterns of the first reading's files, relative to the folder
    key: str  # the file naming each uid's part and dataset problem
    part: Callable[[dict], str]  # a key row -> its part
    group: str  # the key column holding the dataset problem id
    part_columns: tuple[str, ...] = ()  # the key columns `part` reads

    def files(self, root: Path) -> list[Path]:
        """The files this set is read from (what a stage that reads it depends on)."""
        folder = root / LABELS / self.name
        found = [p for pattern in self.labels for p in sorted(folder.glob(pattern))]
        if not found:
            raise FileNotFoundError(f"{folder}: no label file ({', '.join(self.labels)}); has it been read?")
        return [folder / "problems.csv", folder / self.key, *found]

    def read(self, root: Path) -> list[dict]:
        problems_path, key_path, *label_paths = self.files(root)
        key = read_csv(key_path, ("uid", self.group, *self.part_columns))
        label = first_reading(label_paths, root)
        part = {r["uid"]: self.part(r) for r in key}
        group = {r["uid"]: r[self.group] for r in key}
        problems = read_csv(problems_path, ("uid", "equation", "problem"))
        shown = {p["uid"] for p in problems}
        for uid, (_, where) in label.items():  # a label of a problem nobody was shown: a mistyped uid, another set's
            if uid not in shown:
                raise ValueError(f"{where}: uid {uid} is not in {problems_path}")
        out = []
        for line, p in enumerate(problems, start=2):
            if p["uid"] not in label:
                continue  # not read yet
            if part.get(p["uid"]) not in PARTS:
                raise ValueError(f"{problems_path}:{line}: problem {p['uid']} has no part in {key_path.name} "
                                 f"(got {part.get(p['uid'])!r}; expected one of {', '.join(PARTS)})")
            value, where = label[p["uid"]]
            out.append({"uid": p["uid"], "part": part[p["uid"]], "equation": p["equation"], "problem": p["problem"],
                        "label": value, "group": group[p["uid"]], "source": str(LABELS / self.name), "where": where})
        return out


def _split(row: dict) -> str:
    return row["split"]


def _part(row: dict) -> str:
    return row["part"]


def _test(row: dict) -> str:
    return "test"


READ_MODELS = ("gpt_pre", "ours", "ablation", "noun", "eq_softmax", "no_context_loss")
# data/labels/read_folds (the claim read on folds 1-4, studies/read_models `pool`) is no set of a judge's: its
# equations are fold 0's training equations, which a judge on fold 0 was fitted on, so it measures nothing here.
# the sets drawn and read in the corpus's layout (studies/reading/corpus.py): candidates/ beside problems and key
CORPORA = ("corpus", "corpus_round2", "corpus_round3")


def corpus_set(name: str) -> ReadingSet:
    """The readings of a set drawn and read in the corpus's layout under data/labels/<name> (one of CORPORA, or a
    round read but not fitted on, as studies compare)."""
    return ReadingSet(name, ("labels/batch_*.csv",), "key.csv", _split, "id", ("split",))


SETS = (
    *(corpus_set(name) for name in CORPORA),
    # data/labels/judge: four readers a quarter each (labels_e.csv: the second reading of its overlap)
    ReadingSet("judge", ("labels_[abcd].csv",), "sources.csv", _part, "dataset_id", ("part",)),
    ReadingSet("verify_pools", ("labels_a.csv",), "key.csv", _split, "id", ("split",)),
    *(ReadingSet(f"read_models/{name}", ("labels_a.csv", "labels_r[0-9].csv"), "key.csv", _test, "id")
      for name in READ_MODELS),
    ReadingSet("verify_judge", ("labels_a.csv",), "key.csv", _test, "id"),
)
# The sets that hold train and validation readings: all a judge's training stage reads (it never needs the test-only
# sets: a text read in two parts is kept in the earlier one, so the test sets cannot change these two parts).
CHOOSING_SETS = (*CORPORA, "judge", "verify_pools")


def reading_set(name: str) -> ReadingSet:
    return next(s for s in SETS if s.name == name)


def _warn(message: str) -> None:
    warnings.warn(message, LabelConflict, stacklevel=3)


def readings(root: Path, sets: tuple[str, ...] | None = None,
             on_conflict: Callable[[str], None] = _warn) -> dict[str, list[dict]]:
    """part -> its readings from `sets` (names of SETS; default all), each distinct (equation, problem) once.
    `on_conflict(line)`: told of each pair of readings of one text in one part that disagree (the first is kept);
    by default a LabelConflict warning."""
    chosen = [s for s in SETS if sets is None or s.name in sets]
    unknown = set(sets or ()) - {s.name for s in SETS}
    if unknown:
        raise ValueError(f"unknown reading sets {sorted(unknown)}; known: {', '.join(s.name for s in SETS)}")
    rows = [r for s in chosen for r in s.read(root)]
    out: dict[str, list[dict]] = {p: [] for p in PARTS}
    kept: dict[tuple[str, str], dict] = {}
    for part in PARTS:  # train first: a text in two parts stays in the earlier one
        for r in rows:
            if r["part"] != part:
                continue
            text = (r["equation"], r["problem"])
            first = kept.get(text)
            if first is None:
                kept[text] = r
                out[part].append(r)
            elif first["part"] == part and first["label"] != r["label"]:
                on_conflict(f"{first['where']} and {r['where']}: one {part} text read {first['label']} and "
                            f"{r['label']} ({r['equation']} | {r['problem'][:60]}); the first is kept")
    return out


def leaked_problems(problem_ids: Iterable[str], test_ids: Iterable[str]) -> list[str]:
    """The test problems of a fold among the dataset problems readings were written for (a reading's `group`, a
    tuning candidate's `id`), sorted. In 5-fold
    cross-validation one fold's training problems are the other folds' test problems: a judge fitted or chosen, or a
    generator tuned, on readings of fold 0's training equations must not be scored on folds 1-4."""
    return sorted({str(i) for i in problem_ids} & {str(i) for i in test_ids}, key=lambda i: (len(i), i))


def refuse_leaks(problem_ids: Iterable[str], test_ids: Iterable[str], what: str, fold: str) -> None:
    """One error when the readings that fit, choose or tune `what` were written for test problems of `fold`."""
    leaked = leaked_problems(problem_ids, test_ids)
    if leaked:
        raise ValueError(f"{what}: {len(leaked)} of its readings' problems are test problems of {fold} (ids "
                         f"{', '.join(leaked[:5])}{', ...' if len(leaked) > 5 else ''}); nothing fitted, chosen or "
                         "tuned on them may be scored there")


def files(root: Path, sets: tuple[str, ...] | None = None) -> list[Path]:
    """Every file `readings(root, sets)` reads."""
    return [f for s in SETS if sets is None or s.name in sets for f in s.files(root)]


def corpus_candidates(root: Path, name: str = "corpus") -> list[dict]:
    """A corpus's first readings with what each candidate was written from, for tuning a generator on them: one
    dict per read candidate {"id", "equation", "context", "generated", "label", "model", "source", "uid"}; `context`
    is the space-separated words its generator was given (data/labels/<name>/candidates). `name`: one of CORPORA,
    which hold training-fold equations only (`split` train): a generator tuned on them never sees a validation or
    test label."""
    if name not in CORPORA:
        raise ValueError(f"{name!r} is not a reading corpus with candidates; known: {', '.join(CORPORA)}")
    folder = root / LABELS / name
    corpus = reading_set(name)
    problems_path, key_path, *label_paths = corpus.files(root)
    label = first_reading(label_paths, root)
    candidates: dict[tuple[str, ...], dict] = {}
    for path in sorted((folder / "candidates").glob("*.csv")):
        columns = ("split", "id", "equation", "context", "model", "source", "sample", "generated")
        for line, row in enumerate(read_csv(path, columns), start=2):
            where = f"{path.relative_to(root) if path.is_relative_to(root) else path}:{line}"
            first = candidates.setdefault((row["split"], row["id"], row["model"], row["source"], row["sample"]),
                                          row | {"where": where})
            if first["generated"] != row["generated"]:  # two draws claim one sample: which text was read is unknown
                raise ValueError(f"{where}: candidate {row['model']} {row['source']} sample {row['sample']} of "
                                 f"problem {row['id']} is also {first['where']}, with another text")
    texts = {p["uid"]: (line, p) for line, p in enumerate(read_csv(problems_path, ("uid", "equation", "problem")),
                                                            start=2)}
    key_rows = read_csv(key_path, ("uid", "split", "id", "model", "source", "sample"))
    known = {k["uid"] for k in key_rows}
    for uid, (_, where) in label.items():
        if uid not in known:
            raise ValueError(f"{where}: uid {uid} is not in {key_path}")
    out = []
    for line, k in enumerate(key_rows, start=2):
        if k["uid"] not in label:
            continue  # not read yet
        if k["split"] != "train":
            raise ValueError(f"{key_path}:{line}: uid {k['uid']} is a {k['split']!r} problem; the corpus that tunes "
                             f"a generator holds training-fold equations only")
        c = candidates.get((k["split"], k["id"], k["model"], k["source"], k["sample"]))
        if c is None:
            raise ValueError(f"{key_path}:{line}: uid {k['uid']} has no candidate in {folder / 'candidates'} "
                             f"(id {k['id']}, {k['model']}, {k['source']}, sample {k['sample']})")
        shown_line, shown = texts.get(k["uid"], (None, None))
        if shown is None or (shown["equation"], shown["problem"]) != (c["equation"], c["generated"]):
            raise ValueError(f"{problems_path}:{shown_line or '?'}: uid {k['uid']} was shown to its reader as other "
                             f"than its candidate ({c['where']}): the label would tune on a text nobody read")
        out.append({"uid": k["uid"], "id": k["id"], "equation": c["equation"], "context": c["context"],
                    "generated": c["generated"], "label": label[k["uid"]][0], "model": k["model"],
                    "source": k["source"]})
    return out


def tuning_candidates(root: Path, corpora: Sequence[str], models: Sequence[str]) -> list[dict]:
    """The read candidates that tune a generator: `corpus_candidates` of each of `corpora` in turn (names of
    CORPORA), those written by one of `models`."""
    return [r for name in corpora for r in corpus_candidates(root, name) if r["model"] in models]
