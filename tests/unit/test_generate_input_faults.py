"""Issue S2 ("hostile input, round two"), requests: a temperature so small that sampling overflows (item 9), JSON
nested 100,000 deep (10), a request file that is huge or endless (20), --numbers auto that cannot draw (15). Each is
one line naming the field or file, exit 2 / HTTP 400, before any model loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mwpgen.generate import request as request_module
from mwpgen.generate.request import RequestError, parse_request, read_request_file
from tests.helpers.generate_faults import one_line_error, served_error
from tests.helpers.tiny_bundle import run_cli, tiny_served_model


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return tiny_served_model(tmp_path_factory.mktemp("t"))


def _no_model(monkeypatch):
    from mwpgen.generate import cli

    monkeypatch.setattr(cli, "resolve_model", lambda spec: pytest.fail("the model must not load"))


ROOT = Path(__file__).resolve().parents[2]
GOOD = {"equation": "x = 12 - 5", "context": "Joan", "max_new_tokens": 8}


# ---------------------------------------------------------------------------------------------- 9. temperature

def test_a_temperature_too_small_to_sample_is_refused_naming_the_smallest(capsys, monkeypatch, served):
    _no_model(monkeypatch)
    one_line_error(*run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples", "--temperature", "1e-300"),
                    "temperature: 1e-300 is out of range (>= 0.01 and <= 10)")
    served_error(served, [{**GOOD, "temperature": 1e-300}], 400, "request 0: temperature: 1e-300 is out of range "
                  "(>= 0.01 and <= 10)")
    assert parse_request({**GOOD, "temperature": 0.01}).temperature == 0.01  # the smallest is allowed


def test_the_smallest_temperature_samples_finite_probabilities(served):
    import pandas as pd

    out = served.predict(None, pd.DataFrame([{**GOOD, "temperature": 0.01, "verify": 2}]))
    assert len(out) >= 1 and out["log_likelihood"].map(lambda v: v == v).all()


# ---------------------------------------------------------------------------------------------- 10. nesting

def test_json_nested_100000_deep_is_one_line_naming_the_line(capsys, monkeypatch, tmp_path):
    _no_model(monkeypatch)
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"equation": "x = 12 - 5", "context": "apples"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line_error(*run_cli(capsys, "--input", str(deep)), "input: deep.jsonl line 2: nested too deeply to read")


# ---------------------------------------------------------------------------------------------- 20. size

def test_an_endless_request_file_is_refused_without_reading_it_whole(tmp_path):
    """In a process of at most 1 GiB of address space, so that reading /dev/zero whole fails fast (a MemoryError)
    instead of filling the machine's memory."""
    endless = tmp_path / "requests.csv"
    endless.symlink_to("/dev/zero")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)); "
            "from mwpgen.generate import cli; sys.exit(cli.main(['generate', '--input', sys.argv[1]]))")
    proc = subprocess.run([sys.executable, "-c", code, str(endless)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr == f"mwpgen: error: input: {endless} is larger than 64 MiB (the limit of a request file, read " \
        "whole before any model loads); split it\n"


def test_a_request_file_past_the_limit_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(request_module, "MAX_REQUEST_FILE_BYTES", 64)
    path = tmp_path / "r.csv"
    path.write_text("equation,context\n" + "x = 12 - 5,apples\n" * 3)  # 71 bytes
    with pytest.raises(RequestError, match="is larger than 64 bytes"):
        read_request_file(path)
    path.write_text("equation,context\n" + "x = 12 - 5,apples\n" * 2)  # 53 bytes: read
    assert len(read_request_file(path)) == 2


# ---------------------------------------------------------------------------------------------- 15. auto numbers

def test_numbers_auto_names_the_cap_when_the_answer_is_always_above_it(capsys, monkeypatch):
    _no_model(monkeypatch)
    ten = " * ".join(f"num{k}" for k in range(1, 11))  # at least 2 * 3 * ... * 11 = 39,916,800
    code, out, err = run_cli(capsys, "--equation", f"x = {ten}", "--context", "apples", "--numbers", "auto")
    one_line_error(code, out, err, "is above 1,000,000, the largest answer --numbers auto gives, for every one of "
                    "1000 draws")
    assert "whole number" not in err


def test_numbers_auto_on_an_equation_without_a_value_says_so_and_not_to_write_numbers(capsys, monkeypatch):
    _no_model(monkeypatch)
    code, out, err = run_cli(capsys, "--equation", "x = num1 / (num2 - num2)", "--context", "apples", "--numbers",
                             "auto")
    one_line_error(code, out, err, "has no value for any of 1000 draws (a division by zero")
    assert "correct the equation" in err and "write the numbers into the equation" not in err


# ------------------------------------------------------------------------- observation: an invalid params.yaml

def test_an_invalid_params_yaml_is_named_when_it_picks_the_default_model(capsys, monkeypatch, tmp_path):
    from mwpgen.generate import model_resolution

    monkeypatch.setattr(model_resolution, "PROJECT_ROOT", tmp_path)
    (tmp_path / "params.yaml").write_text("experiment:\n  folds: [0]\n  datasets: [arithmetc]\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples")
    # params.yaml's own error, one line a fault, as the pipeline gives it; then where to go
    assert code == 2 and out == "" and err.startswith(f"mwpgen: error: {tmp_path / 'params.yaml'}: invalid parameters")
    assert "experiment.datasets.0: Input should be 'arithmetic', 'mawps' or 'math23k'; got 'arithmetc'" in err
    assert err.rstrip().endswith("give --model)") and "Traceback" not in err
