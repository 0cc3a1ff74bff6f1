"""Issue S2 items 10, 13 and 22 in the served form: mwpgen's own server (tracking/serve.py) in process on loopback
over a tiny served model. A 100,000-deep body, a key given twice, `params` and a busy answer's Retry-After, which
MLflow's scoring server handles before or after the model; and the HTTP faults it must name (type, length, size,
a body sent too slowly). tests/pipeline/test_pyfunc_serve.py runs it as a process on a registered model."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

from tests.helpers.tiny_bundle import tiny_served_model
from tracking import serve
from tracking.served_errors import busy

GOOD = {"equation": "x = 12 - 5", "context": "Joan", "max_new_tokens": 8}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_served_model(tmp_path_factory.mktemp("t"))


@contextmanager
def _serving(predict):
    """The server's URL while it answers with `predict` on a free loopback port."""
    server = serve.make_server(predict, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def url(model):
    with _serving(lambda frame, params: model.predict(None, frame, params)) as url:
        yield url


def _post(url: str, body: bytes | str, content_type: str = "application/json") -> tuple[int, dict, dict]:
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(f"{url}/invocations", data=data, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def _refused(url, body, content_type="application/json") -> tuple[int, str]:
    status, answer, _ = _post(url, body, content_type)
    assert set(answer) >= {"error_code", "message"} and "\n" not in answer["message"], answer
    assert "Traceback" not in answer["message"] and "Failed to predict" not in answer["message"], answer
    return status, answer["message"]


def test_every_form_mlflow_takes_is_answered_the_same(url):
    status, answer, _ = _post(url, json.dumps({"dataframe_records": [GOOD, {**GOOD, "seed": 2}]}))
    assert status == 200 and [p["request"] for p in answer["predictions"]] == [0, 1]
    first = answer["predictions"][0]
    assert first["answer"] == "7" and first["numbers"] == {"num1": "12", "num2": "5"}
    split = {"columns": list(GOOD), "data": [list(GOOD.values())]}
    columns = {k: [v] for k, v in GOOD.items()}
    for body in ({"dataframe_split": split}, {"inputs": [GOOD]}, {"instances": [GOOD]}, {"inputs": columns},
                 {"inputs": GOOD}):
        status, other, _ = _post(url, json.dumps(body))
        assert status == 200 and other["predictions"][0] == first, body
    status, other, _ = _post(url, "equation,context,max_new_tokens\nx = 12 - 5,Joan,8\n", "text/csv")
    assert status == 200 and other["predictions"][0]["text"] == first["text"]


def test_a_key_given_twice_is_named_not_overwritten(url):
    # json.loads (MLflow's server) keeps the last "verify" silently
    body = '{"dataframe_records": [{"equation": "x = 12 - 5", "context": "Joan", "verify": 2, "verify": 8}]}'
    assert _refused(url, body) == (400, "key 'verify' is given twice in one JSON object; keep one")
    body = '{"dataframe_records": [], "dataframe_records": [{"equation": "x = 12 - 5", "context": "Joan"}]}'
    assert _refused(url, body) == (400, "key 'dataframe_records' is given twice in one JSON object; keep one")


def test_json_nested_100000_deep_is_a_400_and_the_server_goes_on(url):
    status, message = _refused(url, '{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert status == 400 and message.startswith("the body's JSON is nested too deep to read")
    status, message = _refused(url, "[" * 100_000)  # cut off as well: still one line, never a RecursionError
    assert status == 400
    with urllib.request.urlopen(f"{url}/ping", timeout=10) as r:
        assert r.status == 200


def test_params_beside_the_records_are_refused(url):
    status, message = _refused(url, json.dumps({"dataframe_records": [GOOD], "params": {"verify": 8}}))
    assert status == 400 and message.startswith("params are not read: give the fields (n, verify, ...) in each")


@pytest.mark.parametrize("body, expected", [
    ("{}", "0 of dataframe_records, dataframe_split, inputs, instances in the body"),
    ('{"dataframe_records": [], "inputs": []}', "2 of dataframe_records"),
    ('{"records": []}', "unknown key 'records' in the body"),
    ("[1, 2]", "expected a JSON object with one of dataframe_records"),
    ('{"dataframe_records": [1, 2]}', "dataframe_records: dataframe_records is a list of request objects"),
    ('{"instances": {"equation": ["x = 1 + 2"], "context": ["a", "b"]}}', "the fields' columns have different"),
    ('{"dataframe_records": [\n{"equation": }]}', "the body is not JSON: Expecting value at line 2, column 14"),
    (b'{"inputs": "\xff"}', "the body is not UTF-8 (byte 12)"),
    ('{"dataframe_records": [{"equation": "x = 12 -", "context": "Joan"}]}', "request 0: equation: expected a"),
    # past int()'s 4,300 digits json.loads alone raises a ValueError naming nothing: read as text, the field names it
    ('{"inputs": [{"equation": "x = 12 - 5", "context": "Joan", "seed": ' + "9" * 5000 + "}]}", "request 0: seed: "),
])
def test_a_bad_body_gets_one_line_naming_its_fault(url, body, expected):
    status, message = _refused(url, body)
    assert status == 400 and expected in message, message


def test_the_http_faults_are_named(url):
    assert _refused(url, json.dumps({"inputs": [GOOD]}), "text/plain") == (
        415, "Content-Type 'text/plain': send application/json or text/csv")
    with urllib.request.urlopen(f"{url}/version", timeout=10) as r:
        assert r.read().decode().count(".") >= 1
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{url}/predict", timeout=10)
    assert missing.value.code == 404 and "POST /invocations" in json.loads(missing.value.read())["message"]


def _raw(url: str, request: bytes, wait_s: float = 10) -> str:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_no_length_a_body_too_big_or_sent_too_slowly_is_named(url, monkeypatch):
    head = "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    answer = _raw(url, f"{head}\r\n".encode())
    assert answer.startswith("HTTP/1.0 411") and "no Content-Length" in answer
    answer = _raw(url, f"{head}Content-Length: {serve.MAX_BODY_BYTES + 1}\r\n\r\n".encode())  # refused unread
    assert answer.startswith("HTTP/1.0 413") and f"limit {serve.MAX_BODY_BYTES}); split the call" in answer
    monkeypatch.setattr(serve.Handler, "timeout", 0.5)  # the socket's timeout, read when a connection starts
    answer = _raw(url, f"{head}Content-Length: 100\r\n\r\n{{\"inputs\"".encode())
    assert answer.startswith("HTTP/1.0 408") and "not sent within" in answer


def test_a_burst_of_50_calls_is_each_answered_200_or_503(model):
    """50 connections at once: every call is answered, by the model or by its admission bound (503), never dropped,
    and the server answers the next call."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    def slow(frame, params):  # a call that takes a while, so that the burst meets the admission bound
        time.sleep(0.2)
        return model.predict(None, frame, params)

    body = json.dumps({"dataframe_records": [GOOD]})
    with _serving(slow) as url:
        with ThreadPoolExecutor(50) as pool:
            statuses = [status for status, _, _ in pool.map(lambda _: _post(url, body), range(50))]
        assert set(statuses) <= {200, 503} and statuses.count(200) >= 1 and statuses.count(503) >= 1, statuses
        assert _post(url, body)[0] == 200


def test_a_busy_answer_says_when_to_retry_in_its_header():
    def full(frame, params):
        raise busy("busy: 4 calls are already in progress or waiting")

    with _serving(full) as url:
        status, answer, headers = _post(url, json.dumps({"dataframe_records": [GOOD]}))
    assert status == 503 and answer["error_class"] == "TEMPORARILY_UNAVAILABLE"
    assert headers["Retry-After"] == str(answer["retry_after_s"]) and answer["message"].endswith("retry in 5 s")


def test_a_bug_in_the_model_is_a_500_in_one_line():
    def broken(frame, params):
        raise KeyError("text")

    with _serving(broken) as url:
        status, message = _refused(url, json.dumps({"dataframe_records": [GOOD]}))
    assert (status, message) == (500, "internal error: KeyError: 'text'")


def test_a_store_that_cannot_be_reached_or_a_bad_flag_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert serve.main(["-m", "models:/mwpgen-ours@arithmetic-fold0", "-p", "0"]) == serve.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m tracking.serve: cannot serve models:/mwpgen-ours@arithmetic-fold0: cannot "
                          "reach the MLflow tracking server at http://127.0.0.1:9") and "\n" not in err
    with pytest.raises(SystemExit) as exited:
        serve.main(["-m", "models:/x/1", "--timeout", "1"])
    assert exited.value.code == 2 and "--timeout: 1 s is outside 5-3600" in capsys.readouterr().err
