"""Hostile input and faults of `mwpgen generate` and the served model (the issue's items 1, 2, 4-6 and 8): values that
would exhaust memory, batches that fail or are interrupted half-way, a busy or slow server, silently accepted
fields, errors that read as bugs. Each answer is one line naming the field, file or option, exit 2 / HTTP 400,
before any model loads where the input allows it."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from fractions import Fraction
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mwpgen.generate import arithmetic, cli
from mwpgen.generate.request import RequestError, evaluate, parse_request
from tests.helpers.generate_faults import fail_at, one_line_error, rows_file, served_error
from tests.helpers.tiny_bundle import FAST, make_tiny_bundle, run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("tiny") / "ours")


# ---------------------------------------------------------------------------------------------- 1. value size

BOMBS = ["x = (((((2^64)^64)^64)^64)^64)^64", "x = ((2^64)^64)^64", "x = ((((2^64)^64)^64)^64)^64"]


@pytest.mark.parametrize("equation", BOMBS)
def test_an_equation_whose_value_would_exhaust_memory_is_refused_at_once(equation):
    start = time.perf_counter()
    with pytest.raises(RequestError, match=r"equation: .* is too large to compute: .*limit 617 digits"):
        parse_request({"equation": equation, "context": "apples"})
    assert time.perf_counter() - start < 0.2


def test_the_command_line_refuses_it_before_any_model_loads(capsys, monkeypatch):
    monkeypatch.setattr(cli, "resolve_model", lambda spec: pytest.fail("the model must not load"))
    one_line_error(*run_cli(capsys, "--equation", BOMBS[1], "--context", "apples"), "is too large to compute")


def test_values_within_the_bound_are_still_computed():
    assert evaluate("x = 2^64 * 2^64", {}) == 2**128
    assert evaluate("x = (2^64)^31 * 2^63", {}) == 2**2047  # 2048 bits: the largest that passes
    assert evaluate("x = (2^64)^32", {}) is None and evaluate("x = (2^64)^31 * 2^64", {}) is None


@pytest.mark.parametrize("equation,expected", [
    ("x = -2^2", -4), ("x = 2^-1*4", 2), ("x = 2^3^2", 512), ("x = -(3 - 5)^2", -4), ("x = 50% * 8", 4),
    ("x = 2 - -3", 5), ("x = +2 * -(1/4)", Fraction(-1, 2)), ("x = 12 / 0.5 ^ 2 - 1", 47)])
def test_the_one_evaluator_keeps_the_grammars_precedence(equation, expected):
    assert evaluate(equation, {}) == expected


def _expressions():
    numbers = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["0.5", "2.25", "64", "99%", "1e3"]))
    return st.recursive(numbers, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from("+-*/^"), inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        inner.map(lambda e: f"({e})"), inner.map(lambda e: f"-{e}"),
        st.tuples(inner, st.integers(-64, 64)).map(lambda t: f"({t[0]})^{t[1]}")), max_leaves=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions())
def test_any_equation_the_check_accepts_evaluates_quickly_within_the_bound(expression):
    equation = f"x = {expression}"
    start = time.perf_counter()
    try:
        request = parse_request({"equation": equation, "context": "apples"})
    except RequestError:
        assert time.perf_counter() - start < 0.5
        return
    values = {k: Fraction(v.rstrip("%")) / (100 if v.endswith("%") else 1) for k, v in request.values.items()}
    x = evaluate(request.equation, values)
    assert time.perf_counter() - start < 0.5
    assert x is not None
    assert max(x.numerator.bit_length(), x.denominator.bit_length()) <= arithmetic.MAX_VALUE_BITS


# ---------------------------------------------------------------------------------------------- 2. batches

def test_a_failing_row_keeps_the_rows_before_it_and_is_named_by_line(capsys, monkeypatch, bundle, tmp_path):
    fail_at(monkeypatch, 2, ValueError("Exceeds the limit"))
    code, out, err = run_cli(capsys, "--model", str(bundle), "--input", str(rows_file(tmp_path, 3)), "--format",
                             "csv", *FAST)
    assert code == 1 and err.count("\n") == 1
    assert "partial.csv line 4: generation failed: ValueError: Exceeds the limit (2 of 3 requests written above)" \
        in err
    assert {r["request"] for r in csv.DictReader(io.StringIO(out))} == {"0", "1"}  # the first two, kept


def test_ctrl_c_says_how_far_it_got_and_resume_finishes_the_same_output(capsys, monkeypatch, bundle, tmp_path):
    requests = rows_file(tmp_path, 6, "six.csv")
    argv = ["--model", str(bundle), "--input", str(requests), "--format", "json", *FAST]
    assert run_cli(capsys, *argv, "--output", str(tmp_path / "straight.json"))[0] == 0

    out_file, marker = tmp_path / "out.json", tmp_path / "out.json.partial"
    with monkeypatch.context() as m:
        fail_at(m, 3, KeyboardInterrupt())
        code, out, err = run_cli(capsys, *argv, "--output", str(out_file))
    assert code == 130 and out == ""
    assert err == f"mwpgen: interrupted after 3 of 6 requests (written to {out_file}; continue with --resume)\n"
    assert marker.exists() and json.loads(marker.read_text())["done"] == 3

    code, _, err = run_cli(capsys, *argv, "--output", str(out_file))  # no silent overwrite of a stopped run
    assert code == 2 and "holds an unfinished run" in err and "--resume" in err
    code, _, err = run_cli(capsys, *argv, "--max-new-tokens", "9", "--output", str(out_file), "--resume")
    assert code == 2 and "started with other requests, options" in err

    with open(out_file, "a", encoding="utf-8") as f:
        f.write(',\n  {"request": 3, "torn')  # a request cut off mid-write by kill -9: not in the marker's bytes
    code, _, err = run_cli(capsys, *argv, "--output", str(out_file), "--resume")
    assert code == 0, err
    assert not marker.exists()
    assert out_file.read_text() == (tmp_path / "straight.json").read_text()
    assert [p["request"] for p in json.loads(out_file.read_text())] == list(range(6))

    code, _, err = run_cli(capsys, *argv, "--output", str(out_file), "--resume")
    assert code == 0 and "nothing to resume" in err


def test_resume_needs_an_output_file(capsys, tmp_path):
    one_line_error(*run_cli(capsys, "--input", str(rows_file(tmp_path, 2)), "--resume"),
                    "--resume needs --output FILE")


def test_stdout_gets_each_request_as_it_finishes(capsys, monkeypatch, bundle, tmp_path):
    from mwpgen.generate.service import Service

    seen = []
    answer = Service.answer

    def watching(self, request, i=0, deadline=None):
        seen.append(capsys.readouterr().out)  # what stdout held when request i started
        return answer(self, request, i, deadline)

    monkeypatch.setattr(Service, "answer", watching)
    code, out, _ = run_cli(capsys, "--model", str(bundle), "--input", str(rows_file(tmp_path, 3)), "--format",
                           "csv", *FAST)
    assert code == 0
    assert seen[0].startswith("request,rank,") and seen[1].startswith("0,1,") and seen[2].startswith("1,1,")


# ---------------------------------------------------------------------------------------------- 5, 6, 8

@pytest.mark.parametrize("argv,expected", [
    (["--top-p", "nan"], "top_p: expected a finite number, got 'nan'"),
    (["--temperature", "inf"], "temperature: expected a finite number, got 'inf'"),
    (["--temperature=-nan"], "temperature: expected a finite number"),
    (["--seed", "7" * 400], "seed: a number of 400 characters is out of range (>= 0 and <= 4294967295)"),
    (["--seed", "7" * 5000], "seed: a number of 5000 characters is out of range"),
    (["--seed", "4294967296"], "seed: 4294967296 is out of range"),
    (["--equation", "x=1" + "+1" * 300], "equation: has more than 100 symbols (limit 100)"),  # the reader's 500
    (["--equation", "x = 1" + " + 1" * 60], "equation: has 123 symbols (limit 100)"),
    (["--equation", "x = 1" + " " * 2000], "equation: has 2005 characters (limit 1000; and at most 100 symbols)"),
])
def test_every_number_and_the_equations_length_are_refused_by_name(capsys, argv, expected):
    equation = [] if "--equation" in argv else ["--equation", "x = 12 - 5"]
    one_line_error(*run_cli(capsys, *equation, "--context", "apples", *argv), expected)


def test_request_file_numbers_are_refused_by_name(capsys, tmp_path):
    (tmp_path / "r.jsonl").write_text('{"equation": "x = 1 + 2", "context": "a", "top_p": NaN}\n'
                                      f'{{"equation": "x = 1 + 2", "context": "a", "seed": {"9" * 5000}}}\n')
    one_line_error(*run_cli(capsys, "--input", str(tmp_path / "r.jsonl")), "r.jsonl line 1: top_p: expected a "
                    "finite number, got nan")
    (tmp_path / "s.jsonl").write_text(f'{{"equation": "x = 1 + 2", "context": "a", "seed": {"9" * 5000}}}\n'
                                      f'{{"equation": "x = 1 + 2", "context": "a", "seed": {"9" * 400}}}\n')
    one_line_error(*run_cli(capsys, "--input", str(tmp_path / "s.jsonl")), "s.jsonl line 1: seed: a number of "
                    "5000 characters is out of range")
    with pytest.raises(RequestError, match=r"^seed: a number of about 401 digits is out of range"):
        parse_request({"equation": "x = 1 + 2", "context": "a", "seed": 10**400})


def test_a_directory_as_input_is_named_a_directory(capsys, tmp_path):
    one_line_error(*run_cli(capsys, "--input", str(tmp_path)), f"input: {tmp_path} is a directory")


def test_device_cuda_without_a_gpu_names_the_option(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    one_line_error(*run_cli(capsys, "--equation", "x = 12 - 5", "--context", "a", "--device", "cuda"),
                    "--device cuda: no CUDA device is visible here")


def test_verify_0_checks_nothing_and_shows_no_verdict(capsys, bundle):
    argv = ["--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan", *FAST]
    code, out, _ = run_cli(capsys, *argv, "--verify", "0")
    assert code == 0 and "verified" not in out and "answer: x = 7" in out
    code, out, _ = run_cli(capsys, *argv, "--format", "json")
    (p,) = json.loads(out)
    assert p["verified"] is None and p["parsed_equation"] is None


def test_fewer_distinct_problems_than_asked_is_said(capsys, bundle):
    code, out, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "Joan", "-n",
                             "5", "--temperature", "0.01", "--format", "json", *FAST)
    problems = json.loads(out)
    assert code == 0 and len(problems) < 5
    assert f"mwpgen: request 1: asked for 5, {len(problems)} distinct (the samples repeated each other" in err


# ---------------------------------------------------------------------------------------------- 4-6: served model

@pytest.fixture(scope="module")
def served(bundle):
    """The pyfunc model as the scoring server holds it, without the server (tests/pipeline/test_pyfunc_serve.py has
    that)."""
    from tracking.pyfunc_model import OursModel

    model = OursModel()
    model.load_context(SimpleNamespace(artifacts={"bundle": str(bundle)}))
    return model


GOOD = {"equation": "x = 12 - 5", "context": "Joan", "max_new_tokens": 8}


def test_served_unknown_fields_nan_and_huge_numbers_are_refused_in_one_line(served):
    served_error(served, [{**GOOD, "verfy": 8}], 400, "request 0: verfy: unknown field")
    served_error(served, [{**GOOD, "top_p": float("nan")}], 400, "request 0: top_p: expected a finite number")
    served_error(served, [{**GOOD, "seed": 10**400}], 400, "request 0: seed: a number of about 401 digits")
    served_error(served, [{"equation": "x = 12 - 5"}], 400, "request 0: context: is empty")
    served_error(served, [{**GOOD, "n": "two"}], 400, "request 0: n: expected a number, got 'two'")


def test_a_call_asking_more_than_fits_the_timeout_is_refused(served):
    served_error(served, [{**GOOD, "verify": 40}, {**GOOD, "verify": 40}], 400,
                  "the call asks for 80 candidates (max(n, verify) summed over its requests; limit 64")


def test_past_the_admitted_calls_a_call_gets_an_immediate_503(served):
    from tracking.pyfunc_model import MAX_CALLS_IN_FLIGHT

    for _ in range(MAX_CALLS_IN_FLIGHT):
        served.admitted.acquire()
    try:
        start = time.perf_counter()
        served_error(served, [GOOD], 503, "busy: 4 calls are already in progress or waiting")
        assert time.perf_counter() - start < 1
    finally:
        for _ in range(MAX_CALLS_IN_FLIGHT):
            served.admitted.release()


def test_a_call_waiting_past_its_deadline_gets_503_and_abandoned_work_stops(served, monkeypatch):
    import tracking.pyfunc_model

    monkeypatch.setenv("MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT", "3")
    monkeypatch.setattr(tracking.pyfunc_model, "DEADLINE_MARGIN_S", 2.9)  # deadline: 0.1 s after the call starts
    held = threading.Event()
    release = threading.Event()

    def hold():
        with served.lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(5)
    try:
        served_error(served, [GOOD], 503, "did not finish before its deadline")
    finally:
        release.set()
        thread.join()
    # A call that cannot finish by its deadline stops there (decoding included) instead of running on unseen.
    start = time.perf_counter()
    served_error(served, [{**GOOD, "verify": 64, "max_new_tokens": 80, "temperature": 5}], 504,
                  "not done within the server's 3 s request timeout")
    assert time.perf_counter() - start < 2.5


def test_the_service_stops_decoding_at_the_deadline(bundle):
    from mwpgen.generate.service import DeadlineExceeded, Service

    service = Service.load(bundle, "cpu")
    request = parse_request({**GOOD, "verify": 64, "max_new_tokens": 256, "temperature": 5})
    start = time.perf_counter()
    with pytest.raises(DeadlineExceeded):
        service.answer(request, 0, deadline=time.monotonic() + 0.05)
    assert time.perf_counter() - start < 1
