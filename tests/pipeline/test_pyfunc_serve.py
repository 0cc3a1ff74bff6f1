"""The registered MLflow model, for real: a tiny ours is logged beside its training run and registered as
`mwpgen-ours` in a scratch sqlite registry, `mlflow models serve` starts on 127.0.0.1, good requests get problems and
bad ones a 4xx with a one-line message (never a 500, never a traceback, never a hang); `mwpgen generate --model`
reads the same model by `models:/` URI and by run id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from mwpgen.generate import cli
from orchestration.local_server import ServerNotServing, free_port, stop_group, wait_until_serving
from tests.helpers.tiny_bundle import make_tiny_bundle

pytestmark = pytest.mark.slow  # end to end (pytest -m "not slow" skips it)


SERVER_START_S = 300  # a loaded 2-core machine (a pipeline beside it) has taken over 120 s
REQUEST_S = 60


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A scratch MLflow store with a fold run that trained a tiny ours, logged and registered by log_ours_model."""
    from tracking.pyfunc_model import log_ours_model, training_run_id
    from tracking.runs import client, experiment_id

    home = tmp_path_factory.mktemp("mlflow")
    before = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{home / 'mlflow.db'}"
    try:
        bundle = make_tiny_bundle(home / "ours")
        c = client()
        run = c.create_run(experiment_id(c), run_name="fold 0",
                           tags={"mwpgen.key": "ours/arithmetic/fold0", "mwpgen.stage.train": "done"})
        c.set_terminated(run.info.run_id)
        assert training_run_id("ours", "arithmetic", 0) == run.info.run_id
        info = log_ours_model(bundle, run.info.run_id, "arithmetic", 0)
        yield {"home": home, "info": info, "env": dict(os.environ)}
    finally:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


def test_the_model_is_registered_beside_the_run_that_trained_it(registry):
    from tracking.runs import client

    info, c = registry["info"], client()
    assert info["model_uri"] == "models:/mwpgen-ours/1" and info["alias_uri"] == "models:/mwpgen-ours@arithmetic-fold0"
    version = c.get_model_version("mwpgen-ours", "1")
    assert version.tags["run_id"] == info["run_id"] and version.tags["dataset"] == "arithmetic"
    run = c.get_run(info["run_id"])
    assert run.data.tags["mwpgen.registered_model"] == "models:/mwpgen-ours/1"
    assert [m.model_id for m in run.outputs.model_outputs] == [info["model_id"]]
    logged = c.get_logged_model(info["model_id"])
    assert logged.experiment_id == run.info.experiment_id and logged.source_run_id == run.info.run_id
    assert str(c.get_model_version_by_alias("mwpgen-ours", "arithmetic-fold0").version) == "1"


def _post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _records(*rows: dict) -> bytes:
    return json.dumps({"dataframe_records": list(rows)}).encode()


GOOD = {"equation": "x = 12 - 5", "context": "Joan beach", "n": 2, "seed": 1, "max_new_tokens": 12}
BAD = {
    "empty body": b"",
    "not JSON": b"not json",
    "no rows": _records(),
    "no input key": b"{}",
    "dangling operator": _records({"equation": "x = num1 +", "context": "Joan"}),
    "unbalanced": _records({"equation": "x = ((num1)", "context": "Joan"}),
    "y for x": _records({"equation": "y = num1 + num2", "context": "Joan"}),
    "two =": _records({"equation": "x = num1 = num2", "context": "Joan"}),
    "300 symbols": _records({"equation": "x=-1" + "+1" * 148, "context": "Joan"}),
    "empty equation": _records({"equation": "", "context": "Joan"}),
    "no context": _records({"equation": "x = 12 - 5"}),
    "empty context": _records({"equation": "x = 12 - 5", "context": ""}),
    "1000-word context": _records({"equation": "x = 12 - 5", "context": " ".join(["word"] * 1000)}),
    "non-ASCII context": _records({"equation": "x = 12 - 5", "context": "\u044f\u0431\u043b\u043e\u043a\u043e"}),
    "n not a number": _records({"equation": "x = 12 - 5", "context": "Joan", "n": "two"}),
    "n too big": _records({"equation": "x = 12 - 5", "context": "Joan", "n": 1000}),
    "too many rows": _records(*[GOOD] * 33),
    "one bad row of two": _records(GOOD, {"equation": "x = num1 - num1", "context": "Joan", "numbers": "auto"}),
    "unknown field": _records({**GOOD, "verfy": 8}),
    "top_p NaN": b'{"dataframe_records": [{"equation": "x = 12 - 5", "context": "Joan", "top_p": NaN}]}',
    "400-digit seed": _records({**GOOD, "seed": 10**400}),
    "too many candidates": _records({**GOOD, "verify": 40}, {**GOOD, "verify": 40}),
    "bomb": _records({"equation": "x = ((2^64)^64)^64", "context": "Joan"}),
}
NAMED = {"unknown field": "request 0: verfy: unknown field", "top_p NaN": "request 0: top_p: expected a finite",
         "400-digit seed": "request 0: seed: a number of about 401 digits", "no context": "request 0: context: is "
         "empty", "n not a number": "request 0: n: expected a number, got 'two'",
         "bomb": "request 0: equation: 'x = ((2^64)^64)^64' is too large to compute"}


@pytest.fixture(scope="module")
def server(registry, tmp_path_factory):
    """`mlflow models serve` of the registered tiny ours on 127.0.0.1, for the module's tests."""
    port, log_path = free_port(), tmp_path_factory.mktemp("serve") / "server.log"
    url = f"http://127.0.0.1:{port}"
    log = open(log_path, "w")
    # Its own process group: `mlflow models serve` starts uvicorn as a child, and both must go at the end.
    process = subprocess.Popen([sys.executable, "-m", "mlflow", "models", "serve", "-m", "models:/mwpgen-ours/1",
                                "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port), "-w", "1"],
                               env={**registry["env"], "MWPGEN_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            wait_until_serving(f"{url}/ping", process, SERVER_START_S, log=log_path, what="mlflow models serve")
        except ServerNotServing as e:
            pytest.fail(str(e))
        yield url
    finally:
        stop_group(process, timeout_s=10)
        log.close()


def test_served_model_answers_good_requests_and_refuses_bad_ones(server):
    url = server
    status, body = _post(f"{url}/invocations", _records(GOOD, {**GOOD, "equation": "x = num1 * num2",
                                                               "numbers": "auto", "verify": 3, "n": 1}))
    assert status == 200, body
    problems = json.loads(body)["predictions"]
    assert [(p["request"], p["rank"]) for p in problems] == [(0, 1), (0, 2), (1, 1)]
    assert problems[0]["answer"] == "7" and problems[0]["numbers"] == {"num1": "12", "num2": "5"}
    # verify 0: no check (null; NaN where pandas mixes the None with the other row's bools in one column)
    assert all(not isinstance(p["verified"], bool) and not isinstance(p["parsed_equation"], str)
               for p in problems[:2])
    assert isinstance(problems[2]["verified"], bool) and problems[2]["parsed_equation"] is not None
    assert int(problems[2]["answer"]) > 0
    status, body = _post(f"{url}/invocations", b"equation,context\nx = 3 + 4,Joan beach\n", "text/csv")
    assert status == 200 and json.loads(body)["predictions"][0]["answer"] == "7"

    for name, payload in BAD.items():
        status, body = _post(f"{url}/invocations", payload)
        assert 400 <= status < 500, (name, status, body)
        answer = json.loads(body)
        assert answer["message"] and "stack_trace" not in answer and "Traceback" not in body, (name, body)
        if name in NAMED:  # the request parser's answer: one line naming the field, no dump of input or schema
            assert NAMED[name] in answer["message"] and "\n" not in answer["message"], (name, body)
            assert "Failed to predict" not in answer["message"], (name, body)
    status, body = _post(f"{url}/invocations", _records({"equation": "x = num1 +", "context": "Joan"}))
    assert json.loads(body)["message"].startswith("request 0: equation: expected a number, variable or '(' at the end")


def test_the_inputs_and_instances_forms_are_answered_and_params_refused(server):
    """Issue S2 item 13: the scoring server's other JSON forms reach the same checks; params are not dropped unseen."""
    for body in ({"inputs": [GOOD]}, {"instances": [GOOD, {**GOOD, "seed": 2}]}):
        status, text = _post(f"{server}/invocations", json.dumps(body).encode())
        assert status == 200 and json.loads(text)["predictions"][0]["answer"] == "7", (body, text)
    status, text = _post(f"{server}/invocations", json.dumps({"inputs": [{**GOOD, "n": "two"}]}).encode())
    assert status == 400 and json.loads(text)["message"] == "request 0: n: expected a number, got 'two'", text
    status, text = _post(f"{server}/invocations", json.dumps({"dataframe_records": [GOOD],
                                                              "params": {"verify": 8}}).encode())
    assert status == 400 and json.loads(text)["message"].startswith("params are not read"), text


LOAD_CALLS = 50


def test_under_load_calls_past_the_bound_get_503_and_the_server_keeps_answering(server):
    """50 concurrent valid calls (verify 2) on loopback: each answered, 200 or an immediate 503, never another
    5xx; then the server answers the next call at once (no abandoned work queued behind it)."""
    url = server
    payload = _records({**GOOD, "n": 1, "verify": 2})

    def call(_):
        start = time.perf_counter()
        status, _body = _post(f"{url}/invocations", payload)
        return status, time.perf_counter() - start

    with ThreadPoolExecutor(LOAD_CALLS) as pool:
        results = list(pool.map(call, range(LOAD_CALLS)))
    statuses = [s for s, _ in results]
    latencies = sorted(t for _, t in results)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    print(f"\n{LOAD_CALLS} concurrent calls: {statuses.count(200)} x 200, {statuses.count(503)} x 503, "
          f"p95 latency {p95:.2f} s, max {latencies[-1]:.2f} s")
    assert set(statuses) <= {200, 503}, statuses
    assert statuses.count(200) >= 1
    start = time.perf_counter()
    status, body = _post(f"{url}/invocations", payload)
    assert status == 200 and time.perf_counter() - start < 10, body


@pytest.mark.parametrize("reference", ["models:/mwpgen-ours/1", "run id"])
def test_the_command_line_reads_the_registered_model(registry, capsys, reference):
    model = registry["info"]["run_id"] if reference == "run id" else reference
    code = cli.main(["generate", "--model", model, "--equation", "x = 12 - 5", "--context", "Joan", "--format",
                     "json", "--max-new-tokens", "8"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)[0]["answer"] == "7"
    code = cli.main(["generate", "--model", "models:/mwpgen-ours/9", "--equation", "x = 12 - 5", "--context", "Joan"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "could not fetch models:/mwpgen-ours/9" in err


def test_served_request_with_a_column_given_twice_is_refused():
    # As in a CSV or JSONL request file (tests/unit/test_generate_cli.py): DataFrame.to_dict would keep one, silently.
    import pandas as pd
    from mlflow.exceptions import MlflowException

    from tracking.served_input import request_rows as _rows

    twice = pd.DataFrame([["x = 12 - 5", "apples", "x = 1 + 2"]], columns=["equation", "context", "equation"])
    with pytest.raises(MlflowException, match="column 'equation' is given twice"):
        _rows(twice)
    assert _rows(pd.DataFrame({"equation": ["x = 12 - 5"], "context": ["apples"]})) == \
        [{"equation": "x = 12 - 5", "context": "apples"}]


def test_mwpgens_own_server_answers_the_registered_model_and_stops_on_sigterm(registry, tmp_path):
    """Issue S2 items 10, 13, 14 and 22, end to end: `python -m tracking.serve` (tracking/serve.py) loads the registered
    model by alias, answers a good call as `mlflow models serve` does, every bad body of BAD with a 4xx in one line, a
    key given twice, a 100,000-deep body and `params` with a 400; SIGTERM stops it with exit 130."""
    import signal

    port, log_path = free_port(), tmp_path / "serve.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        model = "models:/mwpgen-ours@arithmetic-fold0"
        command = [sys.executable, "-m", "tracking.serve", "-m", model, "-p", str(port)]
        process = subprocess.Popen(command, env={**registry["env"], "MWPGEN_DEVICE": "cpu"}, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until_serving(f"{url}/ping", process, SERVER_START_S, log=log_path, what="python -m tracking.serve")
            status, body = _post(f"{url}/invocations", _records(GOOD))
            assert status == 200 and json.loads(body)["predictions"][0]["answer"] == "7", body
            twice = b'{"dataframe_records": [{"equation": "x = 12 - 5", "context": "Joan", "n": 1, "n": 3}]}'
            deep = b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            for name, payload in {**BAD, "key twice": twice, "100,000 deep": deep}.items():
                status, body = _post(f"{url}/invocations", payload)
                message = json.loads(body)["message"]
                assert 400 <= status < 500 and "\n" not in message and "Traceback" not in body, (name, body)
                assert NAMED.get(name, "") in message, (name, body)
            assert "key 'n' is given twice" in json.loads(_post(f"{url}/invocations", twice)[1])["message"]
            status, body = _post(f"{url}/invocations", json.dumps({"inputs": [GOOD], "params": {"n": 1}}).encode())
            assert status == 400 and json.loads(body)["message"].startswith("params are not read"), body
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 130
        finally:
            stop_group(process, timeout_s=10)
