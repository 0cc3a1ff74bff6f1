"""`mwpgen generate` and what it runs (mwpgen/generate/: request.py, service.py, the cli parts) on a tiny random Llama:
every bad input ends in one line naming it with exit code 2, never a traceback; good requests print problems with
their verification, parse and answer in each format; verified sampling ranks as it says."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest
import torch
import yaml

from mwpgen.generate import cli, model_resolution, output_file, output_format
from mwpgen.generate.request import (
    RequestError,
    auto_numbers,
    detokenize,
    evaluate,
    fill_numbers,
    parse_request,
    read_equation,
)
from mwpgen.ours.bundle import load_bundle, load_mwp2eq, save_bundle
from mwpgen.paths import FoldPaths
from tests.helpers.tiny_bundle import FAST, RECORDS, check_verdicts, make_tiny_bundle, make_tiny_judge, run_cli

ROOT = Path(__file__).resolve().parents[2]
@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("tiny") / "ours")


@pytest.fixture(scope="module")
def tiny_judge(bundle, tmp_path_factory) -> Path:
    return make_tiny_judge(Path(str(bundle) + "-base"), tmp_path_factory.mktemp("judge") / "judge")


@pytest.fixture(scope="module")
def bundle_without_mwp2eq(tmp_path_factory) -> Path:
    return make_tiny_bundle(tmp_path_factory.mktemp("tiny") / "ours-no-leq", with_mwp2eq=False)


# ---------------------------------------------------------------------------------------------- bad input

A = ["--context", "apples"]
BAD = {
    "dangling operator": (["--equation", "x = num1 +", *A], "equation: expected a number, variable or '(' at the end"),
    "unbalanced": (["--equation", "x = ((num1)", *A], "equation: unbalanced brackets"),
    "y for x": (["--equation", "y = num1 + num2", *A], "equation: the unknown must be x, got 'y'"),
    "two =": (["--equation", "x = num1 = num2", *A], "equation: expected exactly one '=', found 2"),
    "300 symbols": (["--equation", "x=-1" + "+1" * 148, *A], "equation: has 300 symbols (limit 100)"),
    "empty equation": (["--equation", "", *A], "equation: is empty"),
    "em dash": (["--equation", "x = 12 \u2014 5", *A], "U+2014 EM DASH"),
    "mixed": (["--equation", "x = num1 - 5", *A], "mixes number tokens with the number 5"),
    "zero division": (["--equation", "x = 12 / (5 - 5)", *A], "has no value (division by zero"),
    "empty context": (["--equation", "x = 12 - 5", "--context", ""], "context: is empty"),
    "1000-word context": (["--equation", "x = 12 - 5", "--context", *(["word"] * 1000)],
                          "context: has 1000 words (limit 30)"),
    "non-ASCII context": (["--equation", "x = 12 - 5", "--context", "\u044f\u0431\u043b\u043e\u043a\u043e"],
                          "U+044F CYRILLIC SMALL LETTER YA"),
    "number as keyword": (["--equation", "x = 12 - 5", "--context", "12"], "context: word '12' has no letter"),
    "no equation": (A, "give --equation"),
    "auto with numbers": (["--equation", "x = 12 - 5", *A, "--numbers", "auto"], "already has its numbers"),
    "auto impossible": (["--equation", "x = num1 - num1", *A, "--numbers", "auto"], "numbers: no distinct integers"),
    "verify < n": (["--equation", "x = 12 - 5", *A, "-n", "3", "--verify", "2"], "verify: samples 2 candidates"),
    "verify greedy": (["--equation", "x = 12 - 5", *A, "--verify", "2", "--decoding", "greedy"], "use decoding top_p"),
    "n = 0": (["--equation", "x = 12 - 5", *A, "-n", "0"], "n: 0 is out of range"),
    "n not a number": (["--equation", "x = 12 - 5", *A, "-n", "two"], "n: expected a number, got 'two'"),
    "top-p 0": (["--equation", "x = 12 - 5", *A, "--top-p", "0"], "top_p: 0.0 is out of range"),
    "no such model": (["--equation", "x = 12 - 5", *A, "--model", "/nonexistent/model"], "no such folder"),
}


@pytest.mark.parametrize("argv,expected", BAD.values(), ids=BAD.keys())
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, expected):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("mwpgen: error: "), err
    assert expected in err and "Traceback" not in err


def test_unicode_operators_are_read_not_refused():
    """`−` and `×` are the reader's look-alikes (mwpgen.data.equations): folded, like everywhere in the project."""
    assert read_equation("x = 12 \u2212 5 \u00d7 2") == ("x = num1 - num2 * num3", {"num1": "12", "num2": "5",
                                                                                 "num3": "2"})


def test_python_m_mwpgen_is_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "mwpgen", "generate", "--equation", "x = ((num1)", "--context", "a"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "mwpgen: error: equation: unbalanced brackets in 'x = ((num1)'\n"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts["mwpgen"] == "mwpgen.generate.cli:main"


def test_a_bad_row_of_a_request_file_is_named_by_line(capsys, tmp_path):
    good = "x = 12 - 5,apples basket\n"
    cases = {
        "requests.csv": ("equation,context\n" + good + "x = num1 +,apples\n", "requests.csv line 3: equation:"),
        "ragged.csv": ("equation,context\n" + good + "x = 1 + 2,a,b\n", "ragged.csv line 3: more cells than columns"),
        "nohead.csv": ("x = 1 + 2,a\n", "nohead.csv: the first row must name the columns"),
        "requests.jsonl": ('{"equation": "x = 12 - 5", "context": "a"}\n{"equation": \n',
                           "requests.jsonl line 2: not JSON"),
        "list.jsonl": ('["x = 1 + 2"]\n', "list.jsonl line 1: expected a JSON object"),
        "field.jsonl": ('{"equation": "x = 1 + 2", "context": "a", "colour": 1}\n', "colour: unknown field"),
        "empty.csv": ("", "empty.csv: the first row must name the columns"),
        "blank.jsonl": ("\n\n", "blank.jsonl has no requests"),
        "requests.txt": ("x", "unknown request file type '.txt'"),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        code, out, err = run_cli(capsys, "--input", str(tmp_path / name))
        assert code == 2 and out == "" and err.count("\n") == 1 and expected in err, (name, err)
    (tmp_path / "latin1.csv").write_bytes("equation,context\nx = 1 + 2,caf\xe9\n".encode("latin-1"))
    code, _, err = run_cli(capsys, "--input", str(tmp_path / "latin1.csv"))
    assert code == 2 and "not UTF-8 text (byte 0xe9" in err
    code, _, err = run_cli(capsys, "--input", str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv: No such file" in err
    code, _, err = run_cli(capsys, "--input", str(tmp_path / "requests.csv"), "--equation", "x = 1 + 2")
    assert code == 2 and "not both" in err


def test_a_column_or_key_given_twice_is_an_error_naming_it(capsys, tmp_path):
    # csv.DictReader and json.loads keep the last of two `equation`s silently; a request must not lose one unseen.
    cases = {
        "twice.csv": ("equation,context,equation\nx = 12 - 5,apples,x = 1 + 2\n",
                      "twice.csv: column 'equation' is named twice in the first row (columns 1 and 3)"),
        "spaced.csv": ("equation, context,context \nx = 12 - 5,apples,pears\n",
                       "spaced.csv: column 'context' is named twice in the first row (columns 2 and 3)"),
        "twice.jsonl": ('{"equation": "x = 12 - 5", "context": "a"}\n'
                        '{"equation": "x = 12 - 5", "context": "a", "equation": "x = 1 + 2"}\n',
                        "twice.jsonl line 2: key 'equation' is given twice in one object"),
        "twice.json": ('{"equation": "x = 12 - 5", "context": "a", "context": "b"}\n',
                       "twice.json line 1: key 'context' is given twice"),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        code, out, err = run_cli(capsys, "--input", str(tmp_path / name))
        assert code == 2 and out == "" and err.count("\n") == 1 and expected in err, (name, err)
        assert str(tmp_path) in err or name in err
    # one of each is still fine
    from mwpgen.generate.request import read_request_file
    (tmp_path / "once.csv").write_text("equation,context\nx = 12 - 5,apples\n", encoding="utf-8")
    (tmp_path / "once.jsonl").write_text('{"equation": "x = 12 - 5", "context": "apples"}\n', encoding="utf-8")
    for name in ("once.csv", "once.jsonl"):
        assert [r for _, r in read_request_file(tmp_path / name)] == [{"equation": "x = 12 - 5", "context": "apples"}]


def test_no_default_model_says_how_to_get_one(capsys, monkeypatch, tmp_path):
    # no params.yaml, no models/: the defaults, Arithmetic fold 0
    monkeypatch.setattr(model_resolution, "PROJECT_ROOT", tmp_path)
    code, out, err = run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples")
    assert code == 1 and out == "" and err.startswith("mwpgen: error: no trained ours-rft (ours tuned on blind ")
    assert str(tmp_path / "models" / "ours-rft" / "arithmetic" / "fold0") in err  # serve.model where tuning covers
    for how in ("dvc repro tune@rft-arithmetic-0", "python -m orchestration.pipeline", "dvc pull tune@rft-arithmetic-0",
                "--model", "models/ours/<dataset>/fold<k>", "models:/mwpgen-ours/", "runs:/RUN/mwpgen-ours"):
        assert how in err, how
    assert "min for ours" not in err  # this checkout has committed no training metrics: no cost is invented
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["experiment"].update(datasets=["mawps"], folds=[2])  # a fold tuning does not cover: ours
    params["tuning"]["methods"], params["serve"]["model"] = [], "ours"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    code, _, err = run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples")
    assert code == 1 and err.startswith("mwpgen: error: no trained ours model at ")
    assert "dvc repro train_ours@mawps-2" in err and "dvc pull train_ours@mawps-2" in err


def test_the_served_model_is_the_tuned_one_only_where_tuning_covers_the_fold():
    """served_model (stage register and the CLI's default): serve.model on tuning's folds, ours on every other."""
    from mwpgen.config.schema import validate_params
    from mwpgen.registry import served_model

    params = validate_params({"experiment": {"datasets": ["arithmetic", "mawps"], "folds": [0, 1]}})
    assert served_model(params, "arithmetic", 0) == "ours-rft"
    assert served_model(params, "arithmetic", 1) == served_model(params, "mawps", 0) == "ours"
    untuned = validate_params({"tuning": {"methods": []}, "serve": {"model": "ours"}})
    assert served_model(untuned, "arithmetic", 0) == "ours"


def test_no_model_help_quotes_the_committed_training_times(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(model_resolution, "PROJECT_ROOT", tmp_path)
    for model, wall_s in (("evaluator", 1727.6), ("ours", 4614.9), ("ours-rft", 830.0)):
        path = FoldPaths(tmp_path, model, "arithmetic", 0).train_timing  # where write_metrics keeps the timings
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"wall_s": wall_s}))
    code, _, err = run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples")
    assert code == 1 and "took 29 min for the evaluator" in err and "and 77 min for ours" in err
    assert "then 14 min to tune it (ours-rft)" in err


# ---------------------------------------------------------------------------------------------- generating

def test_text_output_fills_the_numbers_and_gives_the_answer(capsys, bundle):
    code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                             "-n", "2", "--verify", "4", *FAST)
    assert code == 0, err
    assert out.count("verified: ") == 2 and out.count("answer: x = 7  (num1 = 12, num2 = 5)") == 2
    assert "[request 1, problem 2] x = 12 - 5  | context: Joan" in out


def test_json_and_csv_outputs_hold_the_same_problems(capsys, bundle):
    argv = ["--model", str(bundle), "--equation", "x = 12 \u2212 5", "--context", "Joan", "beach", "-n", "3",
            "--verify", "3", "--seed", "4", *FAST]
    code, out, _ = run_cli(capsys, *argv, "--format", "json")
    problems = json.loads(out)
    assert code == 0 and [p["rank"] for p in problems] == [1, 2, 3][: len(problems)] and problems
    for p in problems:
        assert p["equation"] == "x = num1 - num2" and p["given"] == "x = 12 \u2212 5" and p["answer"] == "7"
        assert p["context"] == "Joan beach" and p["numbers"]["num1"] == "12" and p["numbers"]["num2"] == "5"
        assert not re.search(r"\bnum\d+\b", p["text"])  # every number token written back
        assert isinstance(p["verified"], bool) and isinstance(p["parsed_equation"], str)
        assert p["log_likelihood"] < 0
    code, out, _ = run_cli(capsys, *argv, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and tuple(rows[0]) == output_format.CSV_COLUMNS
    assert [r["masked_text"] for r in rows] == [p["masked_text"] for p in problems]  # same seed, same problems


def test_numbers_auto_makes_x_a_positive_whole_number(capsys, bundle):
    code, out, _ = run_cli(capsys, "--model", str(bundle), "--equation", "x = num1 / num2", "--context", "candies",
                           "--numbers", "auto", "--seed", "3", "--format", "json", *FAST)
    (p,) = json.loads(out)
    values = {k: Fraction(v) for k, v in p["numbers"].items()}
    x = evaluate("x = num1 / num2", values)
    assert code == 0 and x > 0 and x.denominator == 1 and p["answer"] == str(x)
    assert auto_numbers("x = num1 / num2", 3) == {k: int(v) for k, v in p["numbers"].items() if k in ("num1", "num2")}


def test_request_file_answers_every_row(capsys, bundle, tmp_path):
    (tmp_path / "r.csv").write_text("equation,context,n,seed\nx = 12 - 5,Joan,2,1\nx = num1 * num2,boxes,,\n",
                                    encoding="utf-8")
    (tmp_path / "r.jsonl").write_text(json.dumps({"equation": "x = 12 - 5", "context": ["Joan"], "n": 2, "seed": 1})
                                      + "\n" + json.dumps({"equation": "x = num1 * num2", "context": "boxes"}) + "\n",
                                      encoding="utf-8")
    outputs = []
    for name in ("r.csv", "r.jsonl"):
        code, out, err = run_cli(capsys, "--model", str(bundle), "--input", str(tmp_path / name), "--format", "json",
                                 *FAST)
        assert code == 0, err
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1]
    assert [p["request"] for p in outputs[0]][-1] == 1 and outputs[0][-1]["answer"] is None  # masked, numbers given


def test_verify_needs_a_co_trained_mwp2eq(capsys, bundle_without_mwp2eq):
    code, out, err = run_cli(capsys, "--model", str(bundle_without_mwp2eq), "--equation", "x = 12 - 5",
                             "--context", "Joan", "--verify", "4", *FAST)
    assert code == 2 and out == "" and err.count("\n") == 1 and "verify: this model has no co-trained mwp2eq" in err
    code, out, _ = run_cli(capsys, "--model", str(bundle_without_mwp2eq), "--equation", "x = 12 - 5", "--context",
                           "Joan", "--format", "json", *FAST)
    (p,) = json.loads(out)
    assert code == 0 and p["verified"] is None and p["parsed_equation"] is None


def test_judged_candidates_come_first_each_group_by_how_firmly_the_parser_reads_the_equation(bundle, monkeypatch):
    import mwpgen.generate.service
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu")
    parses = iter(["x = num1 - num2", "x = num1 + num2"] * 10)  # the judge's parse: 1st the equation, 2nd not
    service.parse = lambda texts, deadline=None: [next(parses) for _ in texts]
    firmness = iter([-0.5, -0.1, -2.0, -0.3, -1.0, -0.2] * 4)
    service.equation_firmness = lambda texts, equation, deadline=None: [next(firmness) for _ in texts]
    # A random tiny generator writes no numbers or questions: the surface checks are the real judge's other half.
    monkeypatch.setattr(mwpgen.generate.service, "judged", lambda parse, equation, text: parse == equation)
    request = parse_request({"equation": "x = num1 - num2", "context": "Joan", "n": 6, "verify": 6,
                             "max_new_tokens": 12})
    problems = service.answer(request)
    flags = [p.verified for p in problems]
    assert flags == sorted(flags, reverse=True) and True in flags and False in flags
    assert all((p.parsed_equation == request.equation) == p.verified for p in problems)
    assert [p.rank for p in problems] == list(range(1, len(problems) + 1))
    n = len(problems)  # distinct candidates (duplicates dropped): candidate i got firmness [...][i]
    expected = sorted(range(n), key=lambda i: (i % 2 == 1, -[-0.5, -0.1, -2.0, -0.3, -1.0, -0.2][i]))
    texts = service.candidates(request, service.prompt(request))
    assert [p.masked_text for p in problems] == [texts[i] for i in expected][:request.n]


def test_a_learned_judge_ranks_by_its_probability_and_verifies_at_its_threshold(bundle, tiny_judge):
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu", judge=tiny_judge)
    assert service.judge is not None and service.judge.info.threshold == 0.5
    service.parse = service.equation_firmness = lambda *a: pytest.fail("the rule's parser ran beside the judge")
    p = [0.2, 0.9, 0.5, 0.7, 0.1, 0.6]
    seen = []
    service.judge.probabilities = lambda texts, equations: seen.append((texts, equations)) or p[:len(texts)]
    request = parse_request({"equation": "x = num1 - num2", "context": "Joan", "n": 6, "verify": 6,
                             "max_new_tokens": 12})
    problems = service.answer(request)
    texts = seen[0][0]
    assert seen[0][1] == [request.equation] * len(texts)  # every candidate judged against the input equation
    expected = sorted(range(len(texts)), key=lambda i: -p[i])
    assert [q.masked_text for q in problems] == [texts[i] for i in expected][:request.n]
    assert [q.judge_probability for q in problems] == sorted(p[:len(texts)], reverse=True)[:request.n]
    assert [q.verified for q in problems] == [p[i] >= 0.5 for i in expected][:request.n]  # the judge's own p
    assert all(q.parsed_equation is None for q in problems)
    plain = Service.load(bundle, "cpu").answer(request)  # no learned judge: the rule, no probability
    assert all(q.judge_probability is None and isinstance(q.parsed_equation, str) for q in plain)


VERIFIED = {"precision_target": 0.9, "min_accepted": 10, "thresholds": {"-": 0.65, "/": None},
            "validation": {"/": {"n": 40, "right": 1, "accepted": 0, "tp": 0, "precision": None}}}


def test_verified_is_held_to_the_shapes_threshold_and_a_request_with_none_verified_says_why(bundle, tiny_judge):
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu", judge=tiny_judge)
    service.judge.info.verified = VERIFIED
    p = [0.2, 0.9, 0.5, 0.7, 0.1, 0.6]
    service.judge.probabilities = lambda texts, equations: p[:len(texts)]

    def answer(equation: str, probabilities: list[float], n: int = 6):
        p[:] = probabilities
        return service.answer(parse_request({"equation": equation, "context": "Joan", "n": n, "verify": 6,
                                             "max_new_tokens": 12}))

    problems = answer("x = num1 - num2", p)
    assert [q.verified for q in problems] == [q.judge_probability >= 0.65 for q in problems]
    assert {q.judge_threshold for q in problems} == {0.65} and {q.verified_note for q in problems} == {None}
    best = answer("x = num1 - num2", [0.2, 0.3, 0.5, 0.6, 0.1, 0.6], n=1)
    assert not best[0].verified and best[0].verified_note.startswith("no verified problem among ")
    assert best[0].verified_note.endswith(" distinct candidates; the best shown, unverified")
    never = answer("x = num1 / num2", [0.99] * 6, n=2)
    assert [q.verified for q in never] == [False, False] and {q.judge_threshold for q in never} == {None}
    assert never[0].verified_note.startswith("equations of shape / are never verified: 1 of 40 validation readings")
    unverified = service.answer(parse_request({"equation": "x = num1 / num2", "context": "Joan", "n": 1}))
    assert unverified[0].verified is None and unverified[0].verified_note is None  # verify 0: nothing checked


def test_a_verify_past_what_pays_says_so_before_the_long_wait(capsys, bundle):
    code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                             "--verify", "33", "--judge", "rule", *FAST)
    assert code == 0 and out, err
    assert "mwpgen: --verify 33: a request draws and judges 33 candidates" in err and "up to 32" in err
    code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                             "--verify", "32", "--judge", "rule", *FAST)
    assert code == 0 and "--verify" not in err


def test_none_verified_is_said_in_every_format(capsys, bundle, tiny_judge, tmp_path):
    import shutil

    judge = tmp_path / "judge"
    shutil.copytree(tiny_judge, judge)
    info = json.loads((judge / "judge.json").read_text(encoding="utf-8"))
    (judge / "judge.json").write_text(json.dumps({**info, "verified": VERIFIED}), encoding="utf-8")
    argv = ["--model", str(bundle), "--equation", "x = 12 / 4", "--context", "Joan", "--verify", "3",
            "--judge", str(judge), *FAST]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert "verified: NO (p = " in out and "learned judge; its shape is never verified)" in out
    assert "\n  equations of shape / are never verified: 1 of 40 validation readings" in out
    code, out, _ = run_cli(capsys, *argv, "--format", "json")
    (problem,) = json.loads(out)
    assert problem["verified"] is False and problem["judge_threshold"] is None
    assert problem["verified_note"].startswith("equations of shape / are never verified")
    code, out, _ = run_cli(capsys, *argv, "--format", "csv")
    (row,) = csv.DictReader(io.StringIO(out))
    assert row["verified"] == "False" and row["verified_note"] == problem["verified_note"]


def test_a_file_begun_with_other_columns_is_not_resumed_with_these(monkeypatch):
    from types import SimpleNamespace

    from mwpgen.generate import output_format

    args = SimpleNamespace(model="m", format="csv")
    requests = [SimpleNamespace(request=parse_request({"equation": "x = 12 - 5", "context": "Joan"}))]
    now = output_file.run_fingerprint(args, requests)
    monkeypatch.setattr(output_format, "CSV_COLUMNS", output_format.CSV_COLUMNS[:13])  # before judge_threshold
    assert output_file.run_fingerprint(args, requests) != now


def test_a_judge_saved_before_per_shape_thresholds_is_named_when_loaded(bundle, tiny_judge, tmp_path):
    import shutil

    from mwpgen.generate.service import Service

    old = tmp_path / "old-judge"
    shutil.copytree(tiny_judge, old)
    info = json.loads((old / "judge.json").read_text(encoding="utf-8"))
    del info["verified"]
    (old / "judge.json").write_text(json.dumps(info), encoding="utf-8")
    with pytest.warns(UserWarning, match="saved before .verified. was held to a precision per equation shape"):
        service = Service.load(bundle, "cpu", judge=old)
    assert service.judge.verified_threshold("x = num1 / num2") == service.judge.info.threshold  # as it was
    info["verified"] = {"precision_target": 0.9}  # cut short: named, not a KeyError later
    (old / "judge.json").write_text(json.dumps(info), encoding="utf-8")
    with pytest.raises(ValueError, match="key 'verified' must hold precision_target, min_accepted, thresholds"):
        Service.load(bundle, "cpu", judge=old)


def test_a_judge_gated_by_the_rule_verifies_only_what_the_rule_accepts_and_ranks_those_first(bundle, tiny_judge,
                                                                                             monkeypatch):
    import mwpgen.generate.service
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu", judge=tiny_judge)
    service.judge.info.gated_by_rule = True
    p = [0.2, 0.9, 0.5, 0.7, 0.1, 0.6]
    service.judge.probabilities = lambda texts, equations: p[:len(texts)]
    request = parse_request({"equation": "x = num1 - num2", "context": "Joan", "n": 6, "verify": 6,
                             "max_new_tokens": 12})
    texts = service.candidates(request, service.prompt(request))
    # the rule's parse: even candidates (in sampling order) read as the equation
    service.parse = lambda rows, deadline=None: ["x = num1 - num2" if texts.index(t) % 2 == 0 else "x = num1 + num2"
                                                 for t in rows]
    monkeypatch.setattr(mwpgen.generate.service, "judged", lambda parse, equation, text: parse == equation)
    problems = service.answer(request)
    expected = sorted(range(len(texts)), key=lambda i: (i % 2 == 1, -p[i]))  # the rule's first, each group by p
    assert [q.masked_text for q in problems] == [texts[i] for i in expected][:request.n]
    # verified: the rule accepts and p reaches 0.5 (0.9 and 0.7 are rejected by the rule)
    assert [q.verified for q in problems] == [i % 2 == 0 and p[i] >= 0.5 for i in expected][:request.n]
    assert all(isinstance(q.parsed_equation, str) for q in problems)
    service.mwp2eq = None  # a model without its co-trained parser cannot gate
    with pytest.raises(RequestError, match="gated by the rule, which parses with it"):
        service.answer(request)


def test_a_gated_judge_reads_by_probability_until_n_are_accepted_and_shows_what_a_full_read_shows(
        bundle, tiny_judge, monkeypatch):
    import random

    import mwpgen.generate.service
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu", judge=tiny_judge)
    service.judge.info.gated_by_rule = True
    monkeypatch.setattr(mwpgen.generate.service, "judged", lambda parse, equation, text: parse == equation)
    rng = random.Random(0)
    for n in (1, 2, 5, 40):
        texts = [f"t{i}" for i in range(32)]
        p = [rng.random() for _ in texts]
        accepted = {t for t in texts if rng.random() < 0.3}
        calls = []
        service.parse = lambda rows, deadline=None, calls=calls, accepted=accepted: calls.append(list(rows)) or [
            "x = num1 - num2" if t in accepted else "x = num1 + num2" for t in rows]
        parsed, rule = service.rule_by_probability(texts, "x = num1 - num2", p, n, chunk=8)
        read = [t for c in calls for t in c]
        assert read == [texts[i] for i in sorted(range(32), key=lambda i: -p[i])][:len(read)]  # highest p first
        assert all(len(c) <= 8 for c in calls)
        found = sum(r is True for r in rule)
        assert found >= min(n, len(accepted)) and (len(read) == 32 or found - n < 8)
        assert [r is None for r in rule] == [x is None for x in parsed] == [t not in read for t in texts]
        full = [t in accepted for t in texts]  # every candidate read
        shown = sorted(range(32), key=lambda i: (rule[i] is not True, -p[i]))[:n]
        assert shown == sorted(range(32), key=lambda i: (not full[i], -p[i]))[:n]


def test_a_gated_judges_verdict_says_what_the_rule_read_and_never_signs_p_against_a_rule_no():
    from types import SimpleNamespace

    def problem(verified, parsed, threshold=0.7):
        return SimpleNamespace(verified=verified, judge_probability=0.81, parsed_equation=parsed,
                               judge_threshold=threshold)

    text = output_format.verdict_text(problem(False, "x = num1 + num2"))
    assert text.startswith("NO (learned judge gated by the rule: the co-trained mwp2eq reads 'x = num1 + num2'")
    assert "p = 0.81, threshold 0.70" in text and ">=" not in text and "<" not in text and "checked" not in text
    text = output_format.verdict_text(problem(True, "x = num1 - num2"))
    assert "reads 'x = num1 - num2', numbers and question checked; p = 0.81" in text
    assert output_format.verdict_text(problem(True, None)) == "yes (p = 0.81 >= 0.70, learned judge)"
    # the threshold is the shape's: a shape the judge never verifies says so, whatever p is
    assert output_format.verdict_text(problem(False, None, None)) == \
        "NO (p = 0.81, learned judge; its shape is never verified)"


def test_the_learned_judges_probability_is_printed_in_every_format(capsys, bundle, tiny_judge):
    argv = ["--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan", "-n", "2", "--verify", "4",
            "--judge", str(tiny_judge), *FAST]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    shown = re.findall(r"verified: (yes|NO) \(p = (\d\.\d+) (>=|<) (\d\.\d+), learned judge\)", out)
    # the sign is the verdict's, and the threshold is the judge's, to as many places as p is shown
    assert len(shown) == 2 and all((v == "yes") is (sign == ">=") and t == f"{0.5:.{len(q) - 2}f}"
                                   for v, q, sign, t in shown)
    code, out, _ = run_cli(capsys, *argv, "--format", "json")
    problems = json.loads(out)
    check_verdicts(tiny_judge, problems)
    assert [("yes" if p["verified"] else "NO", f"{p['judge_probability']:.{len(q) - 2}f}") for p, (_, q, _, _) in
            zip(problems, shown)] == [(v, q) for v, q, _, _ in shown]
    code, out, _ = run_cli(capsys, *argv, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    # appended: the columns before them keep their places
    assert list(rows[0])[12:] == ["judge_probability", "judge_threshold", "verified_note"]
    assert [float(r["judge_probability"]) for r in rows] == [p["judge_probability"] for p in problems]
    code, out, _ = run_cli(capsys, *argv[:-len(FAST) - 2], "--judge", "rule", *FAST, "--format", "json")
    assert all(p["judge_probability"] is None and isinstance(p["parsed_equation"], str) for p in json.loads(out))


def test_the_checkouts_judge_judges_only_the_checkouts_default_model(capsys, monkeypatch, bundle, tiny_judge,
                                                                       tmp_path):
    import shutil

    from mwpgen.judge.saved import save_no_judge

    monkeypatch.setattr(model_resolution, "PROJECT_ROOT", tmp_path)  # no params.yaml: Arithmetic fold 0
    shutil.copytree(bundle, tmp_path / "models" / "ours-rft" / "arithmetic" / "fold0")  # the checkout's served model
    folder = tmp_path / "models" / "judge" / "arithmetic" / "fold0"
    argv = ["--equation", "x = 12 - 5", "--context", "Joan", "--verify", "3", "--format", "json", *FAST]
    save_no_judge(folder, "the rule judged validation as well")  # train_judge adopted none: the rule
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and json.loads(out)[0]["judge_probability"] is None, err
    shutil.rmtree(folder)
    shutil.copytree(tiny_judge, folder)
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and isinstance(json.loads(out)[0]["judge_probability"], float), err
    # a model named by --model (even this same bundle) packages no judge: the rule, not the checkout's judge
    code, out, err = run_cli(capsys, "--model", str(bundle), *argv)
    assert code == 0 and json.loads(out)[0]["judge_probability"] is None, err
    code, out, err = run_cli(capsys, "--model", str(bundle), "--judge", str(folder), *argv)  # unless given
    assert code == 0 and isinstance(json.loads(out)[0]["judge_probability"], float), err


def test_judge_without_verify_is_bad_input(capsys, bundle, tiny_judge, tmp_path):
    for judge in (str(tiny_judge), "rule"):
        code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                                 "--judge", judge, *FAST)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"--judge {judge}: only --verify K reads a judge" in err
    requests = tmp_path / "requests.csv"  # a request file's own verify field counts
    requests.write_text("equation,context,verify\nx = 12 - 5,Joan,2\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "--model", str(bundle), "--input", str(requests), "--judge", str(tiny_judge),
                             "--format", "json", *FAST)
    assert code == 0 and isinstance(json.loads(out)[0]["judge_probability"], float), err


def test_a_malformed_judge_json_is_named(capsys, bundle, tiny_judge, tmp_path):
    import shutil

    for name, text, expected in (("broken", "{not json", "not a readable JSON file"),
                                 ("listed", "[1, 2]", "expected a JSON object, got list"),
                                 ("no_layer", '{"backbone": "x"}', "missing key(s) layer"),
                                 ("typo", '{"backbone": "x", "layer": 1, "treshold": 0.5}', "unknown key(s) treshold"),
                                 ("text_layer", '{"backbone": "x", "layer": "1"}', "key 'layer' must be int")):
        folder = shutil.copytree(tiny_judge, tmp_path / name)
        (folder / "judge.json").write_text(text, encoding="utf-8")
        code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                                 "--verify", "2", "--judge", str(folder), *FAST)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"{folder / 'judge.json'}: {expected}" in err
    no_judge = tmp_path / "no_reason"
    no_judge.mkdir()
    (no_judge / "no_judge.json").write_text('{"why": "?"}', encoding="utf-8")
    code, _, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                           "--verify", "2", "--judge", str(no_judge), *FAST)
    assert code == 2 and f"{no_judge / 'no_judge.json'}: key 'reason' must be a string" in err


def test_resume_needs_the_same_judge(capsys, bundle, tiny_judge, tmp_path):
    """The fingerprint of an unfinished run names its resolved judge and that judge's judge.json: a judge retrained
    in place (another threshold) is another run's."""
    import shutil

    judge = shutil.copytree(tiny_judge, tmp_path / "judge")
    out_file = tmp_path / "out.json"
    argv = ["--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan", "--verify", "2", "--judge",
            str(judge), "--format", "json", "--output", str(out_file), *FAST]
    args = cli.build_parser().parse_args(["generate", *argv])
    requests = cli.read_requests(args)
    identity = output_file.judge_identity
    def fingerprint():
        return output_file.run_fingerprint(args, requests, identity(judge, bundle))
    before = fingerprint()
    out_file.write_text("[\n", encoding="utf-8")  # a run stopped after its start, as FileSink leaves it
    marker = {"fingerprint": before, "requests": 1, "done": 0, "bytes": 2}
    output_file.partial_marker(out_file).write_text(json.dumps(marker))
    saved = (judge / "judge.json").read_text(encoding="utf-8")
    (judge / "judge.json").write_text(json.dumps({**json.loads(saved), "threshold": 0.9}), encoding="utf-8")
    assert fingerprint() != before
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 2 and "started with other requests, options, model, judge or format" in err
    (judge / "judge.json").write_text(saved, encoding="utf-8")
    assert fingerprint() == before
    code, out, err = run_cli(capsys, *argv, "--resume")
    assert code == 0 and len(json.loads(out_file.read_text())) == 1, err
    moved = shutil.copytree(judge, tmp_path / "elsewhere")  # the same judge.json in another folder: another judge
    assert output_file.run_fingerprint(args, requests, identity(moved, bundle)) != before


def test_a_judge_folder_without_a_judge_is_bad_input(capsys, bundle, tmp_path):
    from mwpgen.judge.saved import save_no_judge

    for folder, why in ((tmp_path / "nowhere", "no such folder"), (tmp_path, "no judge.json"),
                        (save_no_judge(tmp_path / "none", "no readings of mawps fold 0"), "no readings of mawps")):
        code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan",
                                 "--verify", "2", "--judge", str(folder), *FAST)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"--judge {folder}: not a learned judge ({why}" in err


def test_the_judge_accepts_only_with_the_parse_and_the_surface_checks(bundle):
    """The service's verdict is mwpgen.judge.rule.judged: a parse of the equation alone is not enough."""
    from mwpgen.generate.service import Service

    service = Service.load(bundle, "cpu")
    service.parse = lambda texts, deadline=None: ["x = num1 - num2"] * len(texts)
    request = parse_request({"equation": "x = num1 - num2", "context": "Joan", "n": 2, "verify": 4,
                             "max_new_tokens": 12})
    from mwpgen.judge.rule import surface_checks

    problems = service.answer(request)
    for p in problems:
        checks = surface_checks(request.equation, p.masked_text)
        assert p.verified is (checks["numbers_once"] and not checks["extra_numbers"] and checks["question"])
    assert not any(p.verified for p in problems)  # the random tiny generator writes no "num1 ... num2 ... ?"


def test_the_log_likelihood_is_the_generators_teacher_forced_one(bundle):
    from mwpgen.generate.service import Service
    from mwpgen.ours.inputs import JointExample, encode_joint, prompt_embeddings

    service = Service.load(bundle, "cpu")
    emb = service.generator.get_input_embeddings()
    enc = encode_joint(service.tokenizer, JointExample("x = num1 - num2", "", ("Joan",)))
    prompt = prompt_embeddings(emb, enc, service.settings["context_tokens"])
    text = "Joan found num1 shells ."
    target = service.tokenizer(" " + text, add_special_tokens=False)["input_ids"] + [service.tokenizer.eos_token_id]
    with torch.no_grad():
        logits = service.generator(inputs_embeds=torch.cat([prompt, emb(torch.tensor(target))])[None]).logits[0]
    logp = torch.log_softmax(logits, -1)
    n = prompt.shape[0]
    expected = sum(float(logp[n - 1 + i, t]) for i, t in enumerate(target)) / len(target)
    scores = service.mean_log_likelihood(prompt, [text, "x", text + " more"])
    assert scores[0] == pytest.approx(expected, abs=1e-5)
    assert service.mean_log_likelihood(prompt, [text, "x", text + " more"], chunk=1) == pytest.approx(scores, abs=1e-5)


def test_bundle_keeps_the_co_trained_mwp2eq(bundle, bundle_without_mwp2eq):
    mwp2eq = load_mwp2eq(bundle)
    generator = load_bundle(bundle)[0]
    assert mwp2eq is not None and not mwp2eq.training
    assert not torch.equal(mwp2eq.get_input_embeddings().weight, generator.get_input_embeddings().weight)
    assert load_mwp2eq(bundle_without_mwp2eq) is None
    assert (bundle / "mwp2eq" / "tokenizer.json").exists()


# ---------------------------------------------------------------------------------------------- numbers

@pytest.mark.parametrize("equation", ["x = num1 + num2 * num3", "x = ( num1 - num2 ) / num3", "x = -num1 ^ 2 + num2",
                                      "x = num1 ^ num2 ^ 2 / num3", "x = num1 * 100 / ( num2 + 1 )"])
def test_evaluate_agrees_with_sympy(equation):
    import sympy

    values = {"num1": Fraction(3), "num2": Fraction(2), "num3": Fraction(7, 2)}
    expr = equation.split("=", 1)[1].replace("^", "**")
    expected = sympy.sympify(expr, locals={k: sympy.Rational(v.numerator, v.denominator) for k, v in values.items()})
    assert evaluate(equation, values) == Fraction(str(expected))


def test_fill_numbers_gives_distractors_fresh_numbers():
    text, numbers = fill_numbers("Sam had num1 , gave num2 and num3 ; num3 left", {"num1": "12", "num2": "5"}, 0)
    assert numbers["num1"] == "12" and numbers["num2"] == "5" and numbers["num3"] not in ("12", "5")
    assert text == f"Sam had 12 , gave 5 and {numbers['num3']} ; {numbers['num3']} left"
    assert detokenize("Sam has $ 12 , Tom 's ( big ) ?") == "Sam has $12, Tom's (big)?"


def test_request_fields_from_csv_text_and_json_types():
    from_csv = parse_request({"equation": "x = 12 - 5", "context": "a b", "n": "2", "seed": "7", "top_p": "0.5"})
    from_json = parse_request({"equation": "x = 12 - 5", "context": ["a", "b"], "n": 2, "seed": 7, "top_p": 0.5})
    assert from_csv == from_json and from_csv.context == ("a", "b")
    assert parse_request({"equation": "x = 1 + 2", "context": "caf\u00e9"}).context == ("cafe",)
    with pytest.raises(RequestError, match="n: expected a number, got True"):
        parse_request({"equation": "x = 12 - 5", "context": "a", "n": True})
    with pytest.raises(RequestError, match="n: expected a whole number"):
        parse_request({"equation": "x = 12 - 5", "context": "a", "n": 1.5})


# ---------------------------------------------------------------------------------------------- bench

def _toy_data(tmp_path: Path) -> Path:
    """A two-fold toy dataset of RECORDS twice, in the layout load_fold reads."""
    data = tmp_path / "data"
    (data / "processed").mkdir(parents=True)
    (data / "splits").mkdir()
    records = [{"id": str(i), "text": p, "equation": e} for i, (e, p, _) in enumerate(RECORDS * 2)]
    (data / "processed" / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (data / "splits" / "toy.json").write_text(json.dumps({"folds": [["0", "1", "2"], ["3", "4", "5"]]}),
                                              encoding="utf-8")
    return data


def _with_selector(bundle: Path, tmp_path: Path) -> Path:
    """The tiny bundle with a (random) context selector: its picks are each problem's context, as for ours."""
    from mwpgen.ours.selector import ContextSelector

    out = tmp_path / "with-selector"
    generator, tokenizer, _, settings = load_bundle(bundle)
    torch.manual_seed(0)
    save_bundle(out, generator, tokenizer, ContextSelector.from_model(generator, "residual", 0.5), settings,
                mwp2eq=load_mwp2eq(bundle))
    return out

def test_verify_k_makes_the_first_subsample_first_with_the_seeds_of_a_run_in_order():
    from studies.verify_k.verify_k import run_order

    test = [{"id": str(i)} for i in range(5)]
    assert run_order(test, [test[3], test[1]]) == [(1, test[1]), (3, test[3]), (0, test[0]), (2, test[2]),
                                                   (4, test[4])]
    assert run_order(test, []) == list(enumerate(test))


def test_verify_k_bench_scores_with_the_independent_evaluator(bundle, tiny_judge, tmp_path, capsys):
    """studies/verify_k/verify_k.py end to end on the tiny bundle, a tiny evaluator, a tiny learned judge and a
    two-fold toy dataset (in this process: three runs of the script, each would pay an interpreter's start-up)."""
    from studies.verify_k import verify_k

    data = _toy_data(tmp_path)
    evaluator = Path(str(bundle) + "-base")  # a tiny random LM with the same vocabulary stands in for the evaluator
    with_selector = _with_selector(bundle, tmp_path)
    out = tmp_path / "out"
    argv = [str(with_selector), "--dataset", "toy", "--fold", "0", "--data", str(data), "--evaluator", str(evaluator),
            "--k", "1", "3", "--max-new-tokens", "8", "--device", "cpu", "--out", str(out), "--judge", str(tiny_judge)]
    verify_k.main(argv)
    printed = capsys.readouterr().out
    result = json.loads((out / "verify_k.json").read_text())
    assert [r["k"] for r in result["rows"]] == [1, 3] and result["n_test"] == 3
    for row in result["rows"]:
        assert 0 <= row["acc_eq"] <= row["acc_eq_equivalent"] <= 1 and row["s_per_problem"] > 0
    assert "| 3 |" in (out / "verify_k.md").read_text() and "| 3 |" in printed
    rows = list(csv.DictReader(io.StringIO((out / "verify_k_generations.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 6 and {r["equation"] for r in rows} <= {e for e, _, _ in RECORDS}
    assert result["judge"] == str(tiny_judge)  # K = 1 verifies nothing: no probability there
    assert all(0 <= float(r["judge_probability"]) <= 1 if r["k"] == "3" else r["judge_probability"] == "" for r in rows)
    # a stopped run resumes: the problems already shown are kept as they are, only the rest is made
    kept = rows[:4]
    kept[0]["generated"] = "a problem the first run showed"
    with open(out / "verify_k_generations.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(kept[0]))
        writer.writeheader()
        writer.writerows(kept)
    verify_k.main([*argv, "--resume"])
    resumed = list(csv.DictReader(io.StringIO((out / "verify_k_generations.csv").read_text(encoding="utf-8"))))
    assert [(r["k"], r["id"]) for r in resumed] == [(r["k"], r["id"]) for r in rows]
    def timeless(rs):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rs]
    # seeded as an uninterrupted run: the rest are made again as they were
    assert resumed[0]["generated"] == "a problem the first run showed" and timeless(resumed[4:]) == timeless(rows[4:])
    with pytest.raises(SystemExit, match="seed differ"):  # another run's settings are never continued
        verify_k.main([*argv, "--resume", "--seed", "7"])
    verify_k.main([*argv, "--resume", "--make", "0"])  # nothing made: what is shown is scored again as it is
    assert json.loads((out / "verify_k.json").read_text())["rows"][1]["n"] == 3
    assert list(csv.DictReader(io.StringIO((out / "verify_k_generations.csv").read_text(encoding="utf-8")))) == resumed


def test_verify_pools_bench_keeps_every_candidate_and_scores_rankings_by_the_readings(bundle, tmp_path):
    """studies/verify_pools/verify_pools.py: sample keeps each pool's distinct candidates in sampling order with what
    the rankings use; build hides all but the text; score joins the labels back per split and ranking (in this
    process, as the script's main runs them)."""
    from studies.verify_pools import verify_pools

    data = _toy_data(tmp_path)
    with_selector = _with_selector(bundle, tmp_path)
    out = tmp_path / "pools"
    verify_pools.main(["sample", str(with_selector), "--dataset", "toy", "--fold", "0", "--split", "test", "--n", "2",
                       "--k", "4", "--temperature", "1", "0.7", "--greedy", "--data", str(data),
                       "--evaluator", str(Path(str(bundle) + "-base")), "--max-new-tokens", "8", "--device", "cpu",
                       "--out", str(out)])
    pools = list(csv.DictReader((out / "pools_test.csv").read_text(encoding="utf-8").splitlines()))
    by_pool: dict[tuple[str, str], list[dict]] = {}
    for r in pools:
        by_pool.setdefault((r["id"], r["source"]), []).append(r)
    assert {source for _, source in by_pool} == {"greedy", "T=1", "T=0.7"} and len({i for i, _ in by_pool}) == 2
    assert all(1 <= len(p) <= 4 for p in by_pool.values())
    assert all(len(p) == 1 for (_, source), p in by_pool.items() if source == "greedy")
    for (_, source), pool in by_pool.items():
        assert [int(r["sample"]) for r in pool] == sorted(int(r["sample"]) for r in pool)  # sampling order
        assert len({r["generated"] for r in pool}) == len(pool)  # distinct candidates, each with its repeats
        assert sum(int(r["copies"]) for r in pool) == (1 if source == "greedy" else 4)
        assert {r["co_verified"] for r in pool} <= {"True", "False"} and all(float(r["co_firmness"]) <= 0 for r in pool)
    verify_pools.main(["build", str(out), "--reading", str(out / "reading")])
    shown = list(csv.DictReader((out / "reading" / "problems.csv").read_text(encoding="utf-8").splitlines()))
    assert list(shown[0]) == ["uid", "equation", "problem"]
    with open(out / "reading" / "labels_a.csv", "w", encoding="utf-8") as f:  # every candidate read right
        f.write("uid,label\n" + "".join(f"{p['uid']},1\n" for p in shown))
    verify_pools.main(["score", "--reading", str(out / "reading"), "--k", "1", "4"])
    result = json.loads((out / "reading" / "reading.json").read_text())
    kinds = result["splits"]["test"]
    assert set(kinds) == {"T=1", "T=0.7", "greedy + T=1", "greedy + T=0.7"}
    for kind in kinds.values():
        assert kind["pools"] == 2 and kind["candidates_right"] == 1.0
        assert all(r["pool_holds_right"] == 1.0 for r in kind["per_k"].values())
    assert kinds["greedy + T=1"]["candidates"] == kinds["T=1"]["candidates"] + 2


def test_the_surface_constraint_study_answers_each_request_both_ways_and_scores_the_readings(bundle, tiny_judge,
                                                                                             tmp_path):
    """studies/surface_constraint/compare.py: each validation equation answered plain and constrained (same seed),
    the pools' shares per arm, a blind set of both arms' shown problems, scored back per arm."""
    from studies.surface_constraint import compare

    out, params, data = tmp_path / "study", tmp_path / "params.yaml", tmp_path / "data"
    (data / "processed").mkdir(parents=True)
    (data / "splits").mkdir()
    records = [{"id": str(i), "text": f"{p} ( {i} )", "equation": e} for i, (e, p, _) in enumerate(RECORDS * 3)]
    (data / "processed" / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    ids = [r["id"] for r in records]
    (data / "splits" / "toy.json").write_text(json.dumps({"folds": [ids[:3], ids[3:]]}), encoding="utf-8")
    default = (ROOT / "params.yaml").read_text(encoding="utf-8")
    params.write_text(default.replace("validation_size: 100", "validation_size: 2"), encoding="utf-8")
    compare.main(["sample", str(_with_selector(bundle, tmp_path)), "--judge", str(tiny_judge), "--dataset", "toy",
                  "--data", str(data), "--params", str(params), "--n", "2", "--k", "3", "--max-new-tokens", "8",
                  "--device", "cpu", "--out", str(out)])
    shown = list(csv.DictReader((out / "shown.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["arm"] for r in shown] == ["plain", "constrained"] * 2 and len({r["id"] for r in shown}) == 2
    arms = json.loads((out / "pools.json").read_text())["arms"]
    assert set(arms) == {"plain", "constrained"} and all(0 <= a["surface_share"] <= 1 for a in arms.values())
    assert all(0 < a["judge_p_mean"] < 1 and a["candidates_per_request"] >= 1 for a in arms.values())
    for r in shown:  # constrained: no numN twice, none the equation lacks (the tiny model may not end in time)
        if r["arm"] == "constrained":
            present = re.findall(r"\bnum\d+\b", r["generated"])
            assert len(present) == len(set(present)) and set(present) <= set(r["equation"].split())
    compare.main(["build", str(out)])
    problems = list(csv.DictReader((out / "reading" / "problems.csv").read_text(encoding="utf-8").splitlines()))
    assert list(problems[0]) == ["uid", "equation", "problem"]
    (out / "reading" / "labels_a.csv").write_text("uid,label\n" + "".join(f"{p['uid']},1\n" for p in problems))
    compare.main(["score", str(out)])
    result = json.loads((out / "reading" / "reading.json").read_text())
    assert result["n"] == 2 and result["constrained_minus_plain"]["mean"] == 0.0
    assert all(a["read_right"] == 1.0 for a in result["arms"].values())
    by_shape = result["by_shape"]  # each equation counted once under its shape, each arm's right ones beside
    assert sum(b["n"] for b in by_shape.values()) == 2 and all(b["plain"] == b["constrained"] == b["n"]
                                                               for b in by_shape.values())


@pytest.mark.parametrize("top_p, temperature", [(0.9, 1.0), (0.5, 0.7), (0.99, 1.3)])
def test_top_p_keeps_the_tokens_transformers_top_p_keeps(top_p, temperature):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    from mwpgen.generate.service import TopP

    torch.manual_seed(0)
    peaked = torch.randn(6, 5000) * 8  # nucleus within the top k
    flat = torch.randn(6, 5000) * 0.3  # nucleus past the top k: the full sort
    scores = torch.cat([peaked, flat])
    expected = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, scores.clone()))
    ours = TopP(top_p, temperature, k=64)(None, scores.clone())
    assert torch.equal(torch.isinf(ours), torch.isinf(expected))
    assert torch.allclose(ours[~torch.isinf(ours)], expected[~torch.isinf(expected)])
    assert (~torch.isinf(ours[6:])).sum(-1).min() > 64  # the flat rows did take the fallback


def test_samples_from_the_prompt_computed_once_are_those_of_one_pass_a_row(bundle):
    from transformers import LogitsProcessorList

    from mwpgen.generate.service import Service, TopP
    from mwpgen.lm.decoding import _generation_config

    service = Service.load(bundle, "cpu")
    request = parse_request({"equation": "x = num1 - num2", "context": "Joan", "n": 1, "verify": 8,
                             "max_new_tokens": 12, "seed": 3})
    prompt = service.prompt(request)
    config = _generation_config(service.tokenizer, "top_p", 4, 1.0, 1.0, 12)
    config.num_return_sequences = request.candidates
    torch.manual_seed(request.seed)
    with torch.no_grad():  # transformers expanding the prompt to every row itself
        out = service.generator.generate(inputs_embeds=prompt[None], attention_mask=torch.ones(1, prompt.shape[0],
                                         dtype=torch.long), generation_config=config,
                                         logits_processor=LogitsProcessorList([TopP(request.top_p)]))
    expected = [t.split("\n", 1)[0].strip() for t in service.tokenizer.batch_decode(out, skip_special_tokens=True)]
    assert service.samples(request, prompt) == expected and len(expected) == request.candidates
