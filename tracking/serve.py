"""The served model behind mwpgen's own HTTP server: the same calls as `mlflow models serve`, with the HTTP layer in
our hands.

    python -m tracking.serve -m models:/mwpgen-ours@arithmetic-fold0 -p 5000
    curl -s localhost:5000/invocations -H 'Content-Type: application/json' \\
      -d '{"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples basket", "verify": 8}]}'

POST /invocations takes what MLflow's scoring server takes (a JSON object with one of dataframe_records,
dataframe_split, inputs, instances; or a CSV with a header) and answers {"predictions": [...]} from the same pyfunc
model (tracking/pyfunc_model.py, loaded by mlflow.pyfunc.load_model), so its checks, limits, admission and deadline
are the model's; GET /ping, /health and /version answer as MLflow's do. What MLflow's server does before and after
the model, and what this one does instead:
* a key given twice in one JSON object: MLflow keeps the last silently; here a 400 names the key;
* JSON nested deeper than Python's parser reads (RecursionError): MLflow's own 500; here a 400;
* a busy answer (503): MLflow can set no header from the model's exception; here `Retry-After` carries the model's
  `retry_after_s`;
* `params` beside the records: handed to the model as MLflow's server hands them, refused there (served_input.py);
* a body is at most MAX_BODY_BYTES, sent within READ_TIMEOUT_S, as application/json or text/csv: else one line
  with 413, 408 or 415.
Every error is a JSON object {"error_code", "message"} whose message is one line. Each connection has a thread;
the model admits at most MAX_CALLS_IN_FLIGHT calls and answers each by its deadline (`--timeout`, the
MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT that `mlflow models serve` reads too).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from mwpgen.generate.request import DuplicateKey, read_json
from tracking.served_errors import RETRY_AFTER_S, bad_request
from tracking.served_input import EXAMPLE

MAX_BODY_BYTES = 1 << 20  # 32 requests of a few fields each fit in a few kB
READ_TIMEOUT_S = 30.0  # a client that has not sent its whole request by then is dropped (a slow-loris socket)
FORMS = ("dataframe_records", "dataframe_split", "inputs", "instances")

# (DataFrame of requests, params or None) -> DataFrame of problems; raises MlflowException for an answered error
Predict = Callable[[pd.DataFrame, "dict | None"], pd.DataFrame]


class CallError(Exception):
    """A call refused before the model sees it: its HTTP status and one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_json(body: bytes) -> dict:
    """The body as a JSON object, read by mwpgen.generate.request.read_json as a request file's line is; one CallError
    naming what is wrong (not UTF-8, the line and column of a syntax error, a key given twice, nesting too deep)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CallError(400, f"the body is not UTF-8 (byte {e.start})") from None
    try:
        # integers as MLflow's server reads them, up to what int() reads (longer ones stay text for the field's check)
        value = read_json(text, max_int_chars=sys.get_int_max_str_digits() or len(text))
    except json.JSONDecodeError as e:
        raise CallError(400, f"the body is not JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except DuplicateKey as e:
        raise CallError(400, f"key {e.key!r} is given twice in one JSON object; keep one") from None
    except RecursionError:
        raise CallError(400, "the body's JSON is nested too deep to read; a call is a list of flat request "
                             f"records: {EXAMPLE}") from None
    if not isinstance(value, dict):
        raise CallError(400, f"expected a JSON object with one of {', '.join(FORMS)}, got a JSON "
                             f"{type(value).__name__}: {EXAMPLE}")
    return value


def json_requests(body: dict) -> tuple[pd.DataFrame, dict | None]:
    """The requests of a JSON call, as the DataFrame MLflow's server would hand the model, and its params."""
    forms = [k for k in FORMS if k in body]
    unknown = sorted(set(body) - set(FORMS) - {"params"})
    if unknown or len(forms) != 1:
        what = f"unknown key {', '.join(map(repr, unknown))}" if unknown else f"{len(forms)} of {', '.join(FORMS)}"
        raise CallError(400, f"{what} in the body; send exactly one of {', '.join(FORMS)}: {EXAMPLE}")
    form, value = forms[0], body[forms[0]]
    try:
        if form == "dataframe_split":
            if not isinstance(value, dict):
                raise ValueError("dataframe_split is an object with 'columns' and 'data'")
            frame = pd.DataFrame(data=value.get("data"), columns=value.get("columns"))
        elif isinstance(value, dict):  # inputs / instances as columns, or as one record
            columnar = value and all(isinstance(v, list) for v in value.values())
            if columnar and len({len(v) for v in value.values()}) != 1:
                raise ValueError("the fields' columns have different lengths; send one record per request")
            frame = pd.DataFrame(value if columnar else [value])
        elif isinstance(value, list) and all(isinstance(r, dict) for r in value):
            frame = pd.DataFrame(value)
        else:
            raise ValueError(f"{form} is a list of request objects")
    except (ValueError, TypeError) as e:
        raise bad_request(f"{form}: {' '.join(str(e).split())}: {EXAMPLE}") from None
    return frame, body.get("params")


def csv_requests(body: bytes) -> pd.DataFrame:
    try:
        return pd.read_csv(io.BytesIO(body), dtype=object, keep_default_na=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise CallError(400, f"the body is not a CSV with a header row: {' '.join(str(e).split())[:200]}") from None


def answer(predict: Predict, content_type: str, body: bytes) -> pd.DataFrame:
    """The problems for one call's body; raises CallError or the model's MlflowException."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json":
        frame, params = json_requests(parse_json(body))  # params, if sent, reach the model, which refuses them
    elif kind == "text/csv":
        frame, params = csv_requests(body), None
    else:
        raise CallError(415, f"Content-Type {content_type or '(none)'!r}: send application/json or text/csv")
    return predict(frame, params)


class Handler(BaseHTTPRequestHandler):
    timeout = READ_TIMEOUT_S  # the socket's: a request not sent within it ends the connection
    predict: Predict
    server_version = "mwpgen-serve"

    def do_GET(self) -> None:
        if self.path in ("/ping", "/health"):
            self._send(200, b"\n", "text/plain")
        elif self.path == "/version":
            from importlib.metadata import version

            self._send(200, version("mlflow").encode(), "text/plain")
        else:
            self._error(404, "NOT_FOUND", f"no page {self.path!r}: POST /invocations, GET /ping, /health, /version")

    def do_POST(self) -> None:
        from mlflow.exceptions import MlflowException

        if self.path != "/invocations":
            return self._error(404, "NOT_FOUND", f"no page {self.path!r}: POST /invocations")
        try:
            problems = answer(self.predict, self.headers.get("Content-Type", ""), self._body())
        except CallError as e:
            return self._error(e.status, HTTPStatus(e.status).name, str(e))
        except MlflowException as e:  # the model's answer: its status, its one-line JSON
            body = json.loads(e.serialize_as_json())
            retry = {"Retry-After": str(body.get("retry_after_s", RETRY_AFTER_S))} if e.get_http_status_code() == 503 \
                else {}
            return self._send(e.get_http_status_code(), json.dumps(body).encode(), headers=retry)
        except Exception as e:  # a bug: one line, no traceback in the answer (the server's log has it)
            self.log_error("%s", f"internal error: {type(e).__name__}: {e}")
            return self._error(500, "INTERNAL_ERROR", f"internal error: {type(e).__name__}: {e}")
        self._send(200, ('{"predictions": ' + problems.to_json(orient="records") + "}").encode())

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise CallError(411, "no Content-Length: send the body with its length")
        if int(length) > MAX_BODY_BYTES:
            raise CallError(413, f"the body has {int(length)} bytes (limit {MAX_BODY_BYTES}); split the call")
        try:
            return self.rfile.read(int(length))
        except TimeoutError:
            raise CallError(408, f"the body was not sent within {READ_TIMEOUT_S:.0f} s") from None

    def _error(self, status: int, code: str, message: str) -> None:
        self._send(status, json.dumps({"error_code": code, "message": " ".join(message.split())}).encode())

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # connections waiting to be accepted (socketserver: 5), for a burst of calls


def make_server(predict: Predict, host: str = "127.0.0.1", port: int = 5000) -> Server:
    """A server (not yet serving: call serve_forever) answering calls with `predict`."""
    handler = type("ModelHandler", (Handler,), {"predict": staticmethod(predict)})
    return Server((host, port), handler)


def load_predict(uri: str) -> Predict:
    """The registered model's predict (the model fetched from the project's MLflow store)."""
    import mlflow.pyfunc

    from tracking.mlflow_uris import pointed_at
    from tracking.model_store import check_reachable
    from tracking.runs import tracking_uri

    store = tracking_uri()
    check_reachable(store)
    with pointed_at(store):  # resolving models:/ reads MLflow's fluent registry URI
        model = mlflow.pyfunc.load_model(uri)
    return lambda frame, params: model.predict(frame, params=params)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracking.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model-uri", required=True,
                        help="the MLflow model to serve: models:/mwpgen-ours@arithmetic-fold0, models:/NAME/VERSION "
                             "or runs:/RUN/PATH (from MLFLOW_TRACKING_URI, default the project's mlflow.db)")
    parser.add_argument("-H", "--host", default="127.0.0.1", help="the address to listen on (default: loopback)")
    parser.add_argument("-p", "--port", type=int, default=5000, help="the port (default 5000)")
    parser.add_argument("-t", "--timeout", type=float, default=None,
                        help="seconds a call may take before its 504 (default MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT "
                             "or 60)")
    args = parser.parse_args(argv)
    if args.timeout is not None:
        if not 5 <= args.timeout <= 3600:
            parser.error(f"--timeout: {args.timeout:g} s is outside 5-3600")
        os.environ["MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT"] = f"{args.timeout:g}"  # the model reads its deadline here
    if not 0 <= args.port <= 65535:
        parser.error(f"--port: {args.port} is not a port")
    try:
        predict = load_predict(args.model_uri)
        server = make_server(predict, args.host, args.port)
    except Exception as e:  # a URI, store or port the user can fix: one line
        print(f"python -m tracking.serve: cannot serve {args.model_uri}: {' '.join(str(e).split())[:500]}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    stopped = threading.Event()

    def stop(signum, frame) -> None:  # SIGTERM as SIGINT: stop accepting, exit 130
        stopped.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print(f"serving {args.model_uri} on http://{args.host}:{server.server_address[1]} (POST /invocations)",
          file=sys.stderr, flush=True)
    server.serve_forever()
    server.server_close()
    return EXIT_INTERRUPTED if stopped.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
