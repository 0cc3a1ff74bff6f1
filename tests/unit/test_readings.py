"""mwpgen/judge/readings.py: every blind reading by part. The committed readings keep the data rule (no text in two
parts, the train part from the corpus only); a text read in two parts stays in the earlier one; a bad label or a
missing file is named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mwpgen.judge import readings as R

ROOT = Path(__file__).resolve().parents[2]


# The committed sets' readings that disagree on a text of one part: named, not resolved silently (the first is kept)
KNOWN_CONFLICTS = ["data/labels/read_models/ablation/labels_r4.csv:82 and "
                   "data/labels/read_models/no_context_loss/labels_r2.csv:32: one test text read 1 and 0"]


@pytest.fixture(scope="module")
def committed() -> dict[str, list[dict]]:
    reported = []
    parts = R.readings(ROOT, on_conflict=reported.append)
    assert [line.split(" (")[0] for line in reported] == KNOWN_CONFLICTS
    return parts


def test_committed_readings_no_text_in_two_parts_and_train_only_from_the_corpus(committed):
    texts = {p: [(r["equation"], r["problem"]) for r in rows] for p, rows in committed.items()}
    assert all(texts.values())
    # what readings() keeps against what the sets hold: every distinct text once, none dropped, none twice
    raw = [r for s in R.SETS for r in s.read(ROOT)]
    assert sum(map(len, texts.values())) == len({(r["equation"], r["problem"]) for r in raw}) < len(raw)
    # the data's own split, which no de-duplication can make true: no dataset problem in two parts (a judge fitted
    # on one candidate of a problem would be measured on its sibling)
    groups = {p: {r["group"] for r in rows} for p, rows in committed.items()}
    assert not groups["train"] & groups["validation"] and not (groups["train"] | groups["validation"]) & groups["test"]
    assert {r["source"] for r in committed["train"]} == {f"data/labels/{name}" for name in R.CORPORA}
    assert {r["source"] for r in committed["validation"]} == {"data/labels/judge", "data/labels/verify_pools"}
    assert all(r["label"] in (0, 1) and r["group"] and r["part"] == p for p, rows in committed.items() for r in rows)
    # data/labels/judge/README.md: 356 validation problems (71 right) and 300 test problems (44 right); one validation
    # text ("There are num1 birds on the fence . num2 of them fly away ...", read right) was also written for a
    # training equation of the corpus, so it is kept in train, the earlier part
    judge = {p: [r["label"] for r in rows if r["source"] == "data/labels/judge"] for p, rows in committed.items()}
    assert (len(judge["validation"]), sum(judge["validation"])) == (356 - 1, 71 - 1)
    assert (len(judge["test"]), sum(judge["test"])) == (300, 44)


def test_the_choosing_sets_give_the_same_train_and_validation_parts(committed):
    chosen = R.readings(ROOT, R.CHOOSING_SETS)  # no conflict among them (a warning would fail this test)
    assert chosen["train"] == committed["train"] and chosen["validation"] == committed["validation"]
    assert {r["source"] for r in chosen["test"]} <= {"data/labels/judge", "data/labels/verify_pools"}
    assert all(f.exists() for f in R.files(ROOT, R.CHOOSING_SETS))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _tiny_root(root: Path) -> Path:
    """A corpus and a verify_pools set sharing one text: read in the train part and in the test part."""
    shared = "x = num1 + num2,Tom has num1 apples and gets num2 more . How many now ?"
    _write(root / "data/labels/corpus/problems.csv", f"uid,equation,problem\nk1,{shared}\nk2,x = num1 - num2,A b ?\n"
           "k3,x = num1 - num2,Not read yet ?\n")
    _write(root / "data/labels/corpus/key.csv", "uid,split,id\nk1,train,11\nk2,train,12\nk3,train,13\n")
    _write(root / "data/labels/corpus/labels/batch_01.csv", "uid,label,note\nk1,1,\nk2,0,asks a given number\n")
    _write(root / "data/labels/verify_pools/problems.csv", f"uid,equation,problem\nc1,{shared}\n"
           "c2,x = num1 * num2,C d ?\nc3,x = num1 * num2,E f ?\n")
    _write(root / "data/labels/verify_pools/key.csv", "uid,split,id\nc1,test,21\nc2,validation,22\nc3,test,23\n")
    _write(root / "data/labels/verify_pools/labels_a.csv", "uid,label\nc1,0\nc2,1\nc3,0\n")
    return root


def test_a_text_read_in_two_parts_stays_in_the_earlier_one_and_unread_problems_are_left_out(tmp_path):
    parts = R.readings(_tiny_root(tmp_path), ("corpus", "verify_pools"))
    assert [(r["problem"], r["label"], r["group"]) for r in parts["train"]] == [
        ("Tom has num1 apples and gets num2 more . How many now ?", 1, "11"), ("A b ?", 0, "12")]
    assert [r["problem"] for r in parts["validation"]] == ["C d ?"]
    assert [r["problem"] for r in parts["test"]] == ["E f ?"]  # the shared text is measured nowhere


def test_readings_that_disagree_on_a_text_of_one_part_are_reported_naming_both_files(tmp_path):
    root = _tiny_root(tmp_path)
    # verify_pools reads "C d ?" (validation) 1; the judge set reads the same text of the same part 0
    _write(root / "data/labels/judge/problems.csv", "uid,equation,problem\nj1,x = num1 * num2,C d ?\n")
    _write(root / "data/labels/judge/sources.csv", "uid,part,dataset_id\nj1,validation,22\n")
    _write(root / "data/labels/judge/labels_a.csv", "uid,label\nj1,0\n")
    reported = []
    parts = R.readings(root, ("judge", "verify_pools"), on_conflict=reported.append)
    assert [(r["problem"], r["label"], r["source"]) for r in parts["validation"]] == [("C d ?", 0, "data/labels/judge")]
    assert reported == ["data/labels/judge/labels_a.csv:2 and data/labels/verify_pools/labels_a.csv:3: one "
                        "validation text read 0 and 1 (x = num1 * num2 | C d ?); the first is kept"]
    with pytest.warns(R.LabelConflict, match=r"judge/labels_a.csv:2 and data/labels/verify_pools/labels_a.csv:3"):
        R.readings(root, ("judge", "verify_pools"))  # by default a warning: never silent
    _write(root / "data/labels/judge/labels_a.csv", "uid,label\nj1,1\n")
    R.readings(root, ("judge", "verify_pools"), on_conflict=reported.append)
    assert len(reported) == 1  # readings that agree are no conflict


def test_a_label_of_no_shown_problem_or_a_missing_column_is_named(tmp_path):
    root = _tiny_root(tmp_path)
    _write(root / "data/labels/verify_pools/labels_a.csv", "uid,label\nc1,0\nc9,1\n")
    with pytest.raises(ValueError, match=r"^data/labels/verify_pools/labels_a.csv:3: uid c9 is not in .*"
                                         r"verify_pools/problems.csv"):
        R.readings(root, ("verify_pools",))
    _write(root / "data/labels/verify_pools/labels_a.csv", "uid,label\nc1,0\n")
    _write(root / "data/labels/verify_pools/key.csv", "uid,id\nc1,21\n")
    with pytest.raises(ValueError, match=r"verify_pools/key.csv: no column 'split' \(its header: uid, id\)"):
        R.readings(root, ("verify_pools",))
    _write(root / "data/labels/verify_pools/key.csv", "uid,split\nc1,test\n")
    with pytest.raises(ValueError, match=r"verify_pools/key.csv: no column 'id'"):
        R.readings(root, ("verify_pools",))
    _write(root / "data/labels/corpus/labels/batch_01.csv", "uid,verdict\nk1,1\n")
    with pytest.raises(ValueError, match=r"corpus/labels/batch_01.csv: no column 'label'"):
        R.readings(root, ("corpus",))


def test_a_part_outside_train_validation_test_is_named(tmp_path):
    """One vocabulary: a set whose key says "dev" (the judge set's old name for its validation part) is an error."""
    root = _tiny_root(tmp_path)
    _write(root / "data/labels/judge/problems.csv", "uid,equation,problem\nj1,x = num1 * num2,C d ?\n")
    _write(root / "data/labels/judge/sources.csv", "uid,part,dataset_id\nj1,dev,22\n")
    _write(root / "data/labels/judge/labels_a.csv", "uid,label\nj1,0\n")
    with pytest.raises(ValueError, match=r"judge/problems.csv:2: problem j1 has no part in sources.csv \(got 'dev'; "
                                         r"expected one of train, validation, test\)"):
        R.readings(root, ("judge",))


def test_every_reading_carries_its_uid_in_its_set(tmp_path):
    rows = R.reading_set("verify_pools").read(_tiny_root(tmp_path))
    assert [(r["uid"], r["part"], r["where"]) for r in rows] == [
        ("c1", "test", "data/labels/verify_pools/labels_a.csv:2"),
        ("c2", "validation", "data/labels/verify_pools/labels_a.csv:3"),
        ("c3", "test", "data/labels/verify_pools/labels_a.csv:4")]


def test_a_bad_label_or_a_missing_file_is_named(tmp_path):
    root = _tiny_root(tmp_path)
    _write(root / "data/labels/verify_pools/labels_a.csv", "uid,label\nc1,0\nc2,maybe\n")
    with pytest.raises(ValueError, match=r"verify_pools/labels_a.csv:3: label must be 0 or 1, got 'maybe'"):
        R.readings(root, ("verify_pools",))
    (root / "data/labels/corpus/key.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"corpus/key.csv: no such file"):
        R.readings(root, ("corpus",))
    shutil.rmtree(root / "data/labels/corpus/labels")
    with pytest.raises(FileNotFoundError, match=r"corpus: no label file \(labels/batch_\*.csv\)"):
        R.files(root, ("corpus",))


@pytest.mark.parametrize("name", ["corpus", "corpus_round2", "corpus_round3"])
def test_the_corpus_candidates_that_tune_are_its_training_readings_with_their_context(name):
    """corpus_candidates (what stage tune and studies/tuning/variant.py read) joins every read problem of a corpus to
    the candidate it was, context included, with the label readings() gives that text."""
    from mwpgen.judge.readings import corpus_candidates, readings

    root = Path(__file__).resolve().parents[2]
    rows = corpus_candidates(root, name)
    train = {(r["equation"], r["problem"]): r["label"] for r in readings(root, (name,))["train"]}
    assert rows and all(r["context"].strip() for r in rows)
    assert {(r["equation"], r["generated"]) for r in rows} == set(train)
    disagree = [r for r in rows if train[(r["equation"], r["generated"])] != r["label"]]
    assert len(disagree) <= len(rows) // 100  # a text read twice apart (two samples alike) may carry either label
    with pytest.raises(ValueError, match="'judge' is not a reading corpus with candidates"):
        corpus_candidates(root, "judge")


def test_tuning_takes_the_named_corpora_in_turn_and_only_the_named_writers():
    """tuning_candidates (stage tune's readings: tuning.corpora, tuning.candidates_from) is each corpus's candidates in
    the order named, kept when a named model wrote them: round 1 is GPT-pre's and ours', later rounds ours-rft's."""
    from mwpgen.judge.readings import corpus_candidates, tuning_candidates

    root = Path(__file__).resolve().parents[2]
    first, second = corpus_candidates(root, "corpus"), corpus_candidates(root, "corpus_round2")
    both = tuning_candidates(root, ["corpus", "corpus_round2"], ["gpt_pre", "ours", "ours-rft"])
    assert both == first + second
    assert tuning_candidates(root, ["corpus_round2", "corpus"], ["ours"]) == [r for r in first if r["model"] == "ours"]
    assert tuning_candidates(root, ["corpus"], ["ours-rft"]) == []


def test_corpus_candidates_refuse_a_label_for_a_text_nobody_read(tmp_path):
    """A candidate whose text differs from what problems.csv showed the reader, or two draws of one sample with two
    texts, is an error naming the file and line: never a label joined to the wrong text."""
    from mwpgen.judge.readings import corpus_candidates

    corpus = tmp_path / "data" / "labels" / "corpus"
    shutil.copytree(ROOT / "data" / "labels" / "corpus", corpus)
    assert corpus_candidates(tmp_path)  # the copy as committed joins
    path = sorted((corpus / "candidates").glob("*.csv"))[0]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    (corpus / "candidates" / "zz_again.csv").write_text(lines[0] + lines[1].replace(" ?", " , please ?", 1),
                                                        encoding="utf-8")
    with pytest.raises(ValueError, match=r"zz_again\.csv:2: .* is also .*:2, with another text"):
        corpus_candidates(tmp_path)
    (corpus / "candidates" / "zz_again.csv").unlink()
    path.write_text(lines[0] + lines[1].replace(" ?", " , please ?", 1) + "".join(lines[2:]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"problems\.csv:\d+: uid \w+ was shown to its reader as other"):
        corpus_candidates(tmp_path)


def test_the_readings_that_fit_and_choose_are_fold_0_training_problems_and_other_folds_test_problems():
    """5-fold cross-validation: fold 0's training problems are folds 1-4's test problems. The corpora and validation
    readings (what the learned judge and the tuned ours are built on) never touch fold 0's test problems, and touch
    every other fold's, so refuse_leaks lets fold 0 through and stops folds 1-4."""
    from mwpgen.data.raw import read_arithmetic_folds
    from mwpgen.judge.readings import CHOOSING_SETS, leaked_problems, readings, refuse_leaks

    mirror = ROOT.parent / "shared" / "data" / "raw" / "arithmetic" / "aggregate"
    if not mirror.is_dir():
        pytest.skip(f"no dataset mirror at {mirror}")
    folds = read_arithmetic_folds(mirror)
    parts = readings(ROOT, CHOOSING_SETS)
    built_on = [r["group"] for r in parts["train"] + parts["validation"]]
    assert not leaked_problems(built_on, folds[0])
    refuse_leaks(built_on, folds[0], "train_judge", "arithmetic fold 0")
    for k in range(1, 5):
        assert leaked_problems(built_on, folds[k])
        with pytest.raises(ValueError, match=rf"tune: \d+ of its readings' problems are test problems of arithmetic "
                                             rf"fold {k} \(ids \d+"):
            refuse_leaks(built_on, folds[k], "tune", f"arithmetic fold {k}")
