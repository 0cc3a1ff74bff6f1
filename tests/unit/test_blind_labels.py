"""The blind labels a judge is measured against (data/labels/judge, read by mwpgen/judge/readings.py): read exactly
(an unreadable label is an error naming file and line), and precision / recall with their bootstrap intervals
(mwpgen/judge/measure.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mwpgen.judge.measure import verdict_quality
from mwpgen.judge.readings import LABELS, reading_set

ROOT = Path(__file__).resolve().parents[2]
JUDGE_SET = reading_set("judge")


def _copy_of_the_set(tmp_path: Path) -> Path:
    """A project root under tmp_path holding a copy of data/labels/judge; returns the copy's folder."""
    return shutil.copytree(ROOT / LABELS / JUDGE_SET.name, tmp_path / LABELS / JUDGE_SET.name)


def test_committed_labels_read_with_their_parts():
    rows = JUDGE_SET.read(ROOT)
    assert len(rows) == len({r["uid"] for r in rows}) == 656
    counts = {p: (sum(r["part"] == p for r in rows), sum(r["label"] for r in rows if r["part"] == p))
              for p in ("validation", "test")}
    assert counts == {"validation": (356, 71), "test": (300, 44)}  # data/labels/judge/agreement.json


def test_a_missing_or_unreadable_label_names_file_and_line(tmp_path):
    folder = _copy_of_the_set(tmp_path)
    first = folder / "labels_a.csv"
    lines = first.read_text(encoding="utf-8").splitlines()
    first.write_text("\n".join([lines[0], lines[1].replace(",0,", ",maybe,", 1)] + lines[2:]) + "\n", encoding="utf-8")
    assert ",maybe," in first.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=r"labels_a.csv:2: label must be 0 or 1, got 'maybe'"):
        JUDGE_SET.read(tmp_path)
    first.write_text("\n".join([lines[0]] + lines[2:]) + "\n", encoding="utf-8")  # the first problem unread
    uid = lines[1].split(",")[0]
    rows = JUDGE_SET.read(tmp_path)
    assert len(rows) == 655 and uid not in {r["uid"] for r in rows}
    first.write_text("\n".join([lines[0], "nobody,1,", *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"labels_a.csv:2: uid nobody is not in .*problems.csv"):
        JUDGE_SET.read(tmp_path)


def test_precision_recall_and_intervals():
    verdicts = [1, 1, 1, 0, 0, 0, 1, 0] * 10
    labels = [1, 1, 0, 1, 0, 0, 1, 0] * 10
    q = verdict_quality(verdicts, labels, seed=1)
    assert q["precision"] == pytest.approx(3 / 4) and q["recall"] == pytest.approx(3 / 4)
    assert (q["accepted"], q["tp"], q["fp"], q["fn"]) == (40, 30, 10, 10)
    for name in ("precision", "recall"):
        low, high = q[f"{name}_ci"]
        assert low < q[name] < high and high - low < 0.4
    assert verdict_quality(verdicts, labels, seed=1) == q  # seeded
    none = verdict_quality([0, 0], [1, 0], seed=1)
    assert none["precision"] is None and none["precision_ci"] is None and none["recall"] == 0.0


def test_intervals_resample_dataset_problems_when_given_their_groups():
    """Five candidates of each of 20 problems, judged and read alike within a problem: 20 independent draws, not
    100. Resampling readings one by one would narrow the intervals as if there were 100."""
    verdicts = [v for v in [1, 1, 1, 0, 0, 0, 1, 0, 1, 0] * 2 for _ in range(5)]
    labels = [y for y in [1, 1, 0, 1, 0, 0, 1, 0, 0, 1] * 2 for _ in range(5)]
    groups = [f"problem{i}" for i in range(20) for _ in range(5)]
    one_by_one = verdict_quality(verdicts, labels, seed=1)
    grouped = verdict_quality(verdicts, labels, seed=1, groups=groups)
    assert grouped["precision"] == one_by_one["precision"] and grouped["recall"] == one_by_one["recall"]
    width = {name: [q[f"{name}_ci"][1] - q[f"{name}_ci"][0] for q in (one_by_one, grouped)]
             for name in ("precision", "recall")}
    assert all(grouped_width > 1.5 * single_width for single_width, grouped_width in width.values())
    # one reading per problem: the same draws as without groups
    assert verdict_quality(verdicts[::5], labels[::5], seed=1, groups=groups[::5]) == \
        verdict_quality(verdicts[::5], labels[::5], seed=1)
    with pytest.raises(ValueError, match="19 groups for 100 verdicts"):
        verdict_quality(verdicts, labels, seed=1, groups=groups[:19])


def test_committed_labels_name_the_dataset_problem_of_each_reading(tmp_path):
    rows = JUDGE_SET.read(ROOT)
    assert all(r["group"] for r in rows) and len({r["group"] for r in rows}) < len(rows)  # candidates share one
    folder = _copy_of_the_set(tmp_path)
    sources = (folder / "sources.csv").read_text(encoding="utf-8").replace(",dataset_id\n", ",problem_id\n", 1)
    (folder / "sources.csv").write_text(sources, encoding="utf-8")
    with pytest.raises(ValueError, match=r"sources.csv: no column 'dataset_id'"):
        JUDGE_SET.read(tmp_path)


def test_a_fold_without_labels_records_that_it_has_none(tmp_path, monkeypatch):
    import flows.measure_judge as stage
    from mwpgen.config.schema import Params
    from mwpgen.paths import FoldPaths

    monkeypatch.setattr(stage, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(stage, "fold_paths", lambda model, dataset, fold: FoldPaths(tmp_path, model, dataset, fold))
    result = stage.measure_judge.fn(Params(), "mawps", 0)  # the flow's body: no Prefect run, no model loaded
    written = json.loads((tmp_path / "metrics" / "judge" / "mawps" / "fold0.json").read_text())
    assert result == written and written["n"] == 0 and "arithmetic fold 0" in written["no_labels"]
    assert (tmp_path / "results" / "judge" / "mawps" / "fold0.jsonl").read_text() == ""


def test_a_learned_judges_precision_and_recall_on_tests_are_those_of_its_verdicts(monkeypatch):
    import flows.measure_judge as stage
    from mwpgen.judge.saved import JudgeInfo

    monkeypatch.setattr(stage, "judged", lambda parse, equation, problem: parse == equation)
    rows = [("a", 1, 0.9, True), ("b", 0, 0.8, True), ("c", 1, 0.7, False), ("d", 1, 0.2, True),
            ("e", 0, 0.95, False), ("f", 1, 0.6, True)]
    tests = [
        {"problem": t, "equation": "x = num1 + num2", "label": y, "group": t, "source": "s"} for t, y, _, _ in rows
    ]
    parse_of = {t: "x = num1 + num2" if rule else "x = num1 - num2" for t, _, _, rule in rows}
    probability_of = {(t, "x = num1 + num2"): p for t, _, p, _ in rows}
    for threshold in (0.5, 0.0):  # 0: a hand-edited gated judge, where the gated scores' threshold would mislead
        info = JudgeInfo("lm", 12, threshold=threshold, gated_by_rule=True)
        learned = stage.learned_on_tests(info, tests, parse_of, probability_of, seed=0)["learned"]
        accepted = [t for t, _, p, rule in rows if rule and p >= threshold]  # what the product would verify
        right = [t for t, y, _, _ in rows if y]
        tp = len(set(accepted) & set(right))
        assert (learned["accepted"], learned["tp"]) == (len(accepted), tp)
        assert learned["precision"] == round(tp / len(accepted), 4)
        assert learned["recall"] == round(tp / len(right), 4)
