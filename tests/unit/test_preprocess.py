import os
from pathlib import Path

import pytest

from mwpgen.data.preprocess import PAPER_TABLE1, compare_with_paper, dataset_stats, preprocess_problems
from mwpgen.data.raw import RawProblem, read_arithmetic, read_mawps

MIRROR = Path(os.environ.get("MWPGEN_MIRROR", Path(__file__).resolve().parents[2].parent / "shared" / "data" / "raw"))

RECORD_KEYS = ["id", "dataset", "text", "equation", "equation_as_written", "numbers", "source_text", "source_equation"]
QUARANTINE_KEYS = ["id", "dataset", "reason", "detail", "source_text", "source_equation"]

PROBLEMS = [
    RawProblem("mawps", "1", "Joan found 70.0 seashells . She has 27.0 left .", "X=(70.0-27.0)"),
    RawProblem("mawps", "2", "Sara has saved 11 quarters .", "x=11*25"),                     # unmatched_number
    RawProblem("mawps", "3", "Jason gave 9 and has 4 .", "X-9=4"),                           # unknown_inside
    RawProblem("mawps", "4", "It snowed 0.32 and 0.21 inches .", "X=0.32=0.21"),             # unparsable
    RawProblem("mawps", "5", "There are 3 cats .", "3=3"),                                   # no_unknown
    RawProblem("mawps", "6", "There are 3 cats .", "x=y+3"),                                 # multiple_unknowns
    RawProblem("mawps", "7", "   ", "x=1+1"),                                                # empty_text
    RawProblem("mawps", "1", "Joan found 70 shells .", "x=70"),                              # duplicate_id
    RawProblem("mawps", "8", "Bryan has 56 books in each of his 9 shelves .", "x=56*9"),
]


def test_every_problem_lands_in_exactly_one_list():
    records, quarantined = preprocess_problems(PROBLEMS)
    assert len(records) + len(quarantined) == len(PROBLEMS)
    assert [r["id"] for r in records] == ["1", "8"]
    assert [(q["id"], q["reason"]) for q in quarantined] == [
        ("2", "unmatched_number"), ("3", "unknown_inside"), ("4", "unparsable"), ("5", "no_unknown"),
        ("6", "multiple_unknowns"), ("7", "empty_text"), ("1", "duplicate_id")]


def test_row_formats_match_the_architecture_doc():
    records, quarantined = preprocess_problems(PROBLEMS)
    assert list(records[0]) == RECORD_KEYS
    assert records[0] == {
        "id": "1", "dataset": "mawps", "text": "Joan found num1 seashells . She has num2 left .",
        "equation": "x = num1 - num2", "equation_as_written": "x = ( num1 - num2 )", "numbers": ["70.0", "27.0"],
        "source_text": "Joan found 70.0 seashells . She has 27.0 left .", "source_equation": "X=(70.0-27.0)"}
    for q in quarantined:
        assert list(q) == QUARANTINE_KEYS and q["detail"]
    assert "25" in quarantined[0]["detail"]


def test_constants_argument_is_used():
    problem = [RawProblem("mawps", "1", "Sally saw 1 dozen birds .", "x=1*12")]
    assert preprocess_problems(problem, constants=("1",))[1][0]["reason"] == "unmatched_number"
    assert preprocess_problems(problem, constants=("1", "12"))[0][0]["equation"] == "x = num1 * 12"


def test_math23k_scales_apply_only_to_math23k():
    text, eq = "The price is 280000 yuan , paying 20000 yuan a year .", "x=28/2"
    assert preprocess_problems([RawProblem("math23k", "8", text, eq)])[0][0]["equation"] == "x = num1 / num2"
    assert preprocess_problems([RawProblem("mawps", "8", text, eq)])[1][0]["reason"] == "unmatched_number"


def test_dataset_stats():
    records, quarantined = preprocess_problems(PROBLEMS)
    stats = dataset_stats(records, len(PROBLEMS), quarantined)
    # words: 10 and 11 tokens; symbols: "x = ( num1 - num2 )" = 7, "x = num1 * num2" = 5
    assert stats == {"mwps": 9, "kept": 2, "quarantined": 7, "avg_words": 10.5, "avg_symbols": 6.0,
                     "quarantined_by_reason": {"duplicate_id": 1, "empty_text": 1, "multiple_unknowns": 1,
                                               "no_unknown": 1, "unknown_inside": 1, "unmatched_number": 1,
                                               "unparsable": 1}}
    assert dataset_stats([], 0)["avg_words"] == 0.0
    assert compare_with_paper("mawps", stats)["avg_symbols"] == {"ours": 6.0, "paper": 8.16}


def test_paper_table1():
    assert PAPER_TABLE1["math23k"] == {"mwps": 23162, "avg_words": 35.23, "avg_symbols": 8.78}
    assert [PAPER_TABLE1[d]["mwps"] for d in ("arithmetic", "mawps", "math23k")] == [1492, 2373, 23162]


# --- reads the shared raw data (skipped when it is absent); Math23K is left to the pipeline for speed ---

@pytest.mark.parametrize("dataset, reader, relative, max_quarantined", [
    ("arithmetic", read_arithmetic, "arithmetic/questions.json", 0),
    ("mawps", read_mawps, "mawps/MAWPS.json", 47),
])
def test_real_data_quarantine_and_table1(dataset, reader, relative, max_quarantined):
    path = MIRROR / relative
    if not path.exists():
        pytest.skip(f"shared raw data not available: {path}")
    problems = reader(path)
    records, quarantined = preprocess_problems(problems)
    assert len(records) + len(quarantined) == len(problems) == PAPER_TABLE1[dataset]["mwps"]
    assert len(quarantined) <= max_quarantined  # under 2%
    stats = dataset_stats(records, len(problems), quarantined)
    assert abs(stats["avg_words"] - PAPER_TABLE1[dataset]["avg_words"]) < 0.2
    assert abs(stats["avg_symbols"] - PAPER_TABLE1[dataset]["avg_symbols"]) < 0.1


def test_constants_may_be_floats_as_read_from_params_yaml():
    problem = [RawProblem("mawps", "1", "It costs 390 after 40 % off .", "x=390/(1.0-40%)*3.14")]
    assert preprocess_problems(problem, constants=[1.0, 3.14])[0][0]["equation"] == "x = num1 / ( 1 - num2 ) * 3.14"
