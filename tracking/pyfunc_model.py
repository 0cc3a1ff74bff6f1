"""The trained ours as an MLflow pyfunc model: logged beside the run that trained it, registered as `mwpgen-ours`,
served by `python -m tracking.serve -m models:/mwpgen-ours/<version>` (tracking/serve.py: the same calls, with the
HTTP layer's faults named) or `mlflow models serve -m models:/mwpgen-ours/<version> --env-manager local`.

    POST /invocations  {"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples basket", "n": 2}]}
    -> {"predictions": [{"request": 0, "rank": 1, "text": "...", "verified": true, "parsed_equation": "...",
                         "answer": "7", "numbers": {"num1": "12", "num2": "5"}, ...}, ...]}

One row per request (the fields of mwpgen.generate.request.Request: equation and context, optionally n, seed, numbers,
verify, decoding, top_p, temperature, num_beams, max_new_tokens), one output row per problem
(mwpgen.generate.service.Problem), the same code path as `mwpgen generate`.

The model folder holds the bundle (artifacts/bundle: generator, selector, co-trained mwp2eq), the fold's learned
judge when it has one (artifacts/judge, the train_judge stage's models/judge/<dataset>/fold<k>: `verify` ranks by its
probability, `judge_probability` in each output row; without one, by the rule with the co-trained mwp2eq) and a copy
of the code it was logged with (code/mwpgen, code/tasks), so a registered version keeps answering as it did when it was
registered, whatever the repository holds later; the third-party packages are pinned in its requirements.

Errors. The scoring server turns an MlflowException into its error code's HTTP status with the message as JSON,
and any other exception into a 400 that carries the traceback. So `predict` turns a bad request into
INVALID_PARAMETER_VALUE (400, one line naming the request and the field) and an unexpected failure into
INTERNAL_ERROR (500, one line, no traceback). The server prefixes the message of every MlflowException from
predict with a dump of the input DataFrame; OneLineError (its public `serialize_as_json`) answers with the one line
(tracking/served_errors.py, each with an error_class that fits its status). Every JSON form the server accepts
(dataframe_records, dataframe_split, inputs, instances) is read into plain records by tracking/served_input.py;
`params` is refused (not read).
The model declares no input schema (its signature has outputs only): with one, MLflow drops an unknown column
unseen (`"verfy": 8` answered as if verify were not given) and answers a missing or mistyped field with a dump of
the input and the schema before `predict` runs. mwpgen.generate.request checks every field instead, by name.

Load. The server runs each call in a thread and gives up on it after MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT
(60 s by default) with a 504, but the thread runs on. So:
* at most MAX_CALLS_IN_FLIGHT calls are admitted (one generating, the others waiting for it); one more gets an
  immediate 503 (TEMPORARILY_UNAVAILABLE) saying to retry, rather than a 504 a minute later;
* every admitted call has a deadline, DEADLINE_MARGIN_S before the server's timeout: a call still waiting then
  gets a 503, and generation past it stops (decoding at the next token, the rest between steps and rows) with a
  504 (DEADLINE_EXCEEDED), so no abandoned call keeps the model busy;
* a call asks for at most MAX_CANDIDATES_PER_CALL candidates (the sum over its rows of max(n, verify)), so that
  one call fits the timeout: README measured 10 s for verify 8 and 20 s for verify 32, loading included, with
  the default ours on a 2-core CPU, about 0.4 s a candidate, so 64 take about 25 s of the 60. The request's own
  maxima (n <= 20, verify <= 64, MAX_ROWS rows) still hold; the budget binds their sum. A longer timeout does not
  raise the budget: it is about one call, not a queue. Decoding's cost grows with the tokens too, so the call's
  sequences times their max_new_tokens are bound as well (MAX_CANDIDATE_TOKENS_PER_CALL: 64 candidates at the
  default 80 tokens): `verify: 64, max_new_tokens: 256` is refused at once rather than admitted to a 504.
Requests are answered one at a time (a lock): seeded sampling shares torch's global generator.

No Prefect here: a serving process imports this module to unpickle the model (flows/register.py wraps
`log_ours_model` as a task).
"""

from __future__ import annotations

import os
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.environment_variables import MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT
from mlflow.models import Model, ModelSignature
from mlflow.pyfunc import PythonModel
from mlflow.types.schema import ColSpec, Map, Schema

from mwpgen.generate.request import FIELDS, MAX_N, MAX_VERIFY, RequestError, parse_request
from mwpgen.generate.served_name import MLFLOW_MODEL_NAME
from mwpgen.paths import PROJECT_ROOT
from tracking.mlflow_uris import pointed_at
from tracking.runs import client, experiment_id, tracking_uri
from tracking.served_errors import bad_request, busy, deadline_exceeded, generation_failed
from tracking.served_input import EXAMPLE, request_rows

# Logged by path (MLflow's models-from-code): the model is rebuilt from this file at load, never unpickled
SERVED_MODEL_CODE = Path(__file__).with_name("served_model.py")
MAX_ROWS = 32  # requests per call
MAX_CANDIDATES_PER_CALL = 64  # sum over a call's rows of max(n, verify): one call fits the timeout (see above)
# sum over a call's rows of its sequences (max(n, verify); num_beams for beam) x max_new_tokens: decoding's cost,
# MAX_CANDIDATES_PER_CALL at the default 80 tokens (verify 64 at 256 tokens would not finish: refused at once)
MAX_CANDIDATE_TOKENS_PER_CALL = MAX_CANDIDATES_PER_CALL * 80
MAX_CALLS_IN_FLIGHT = 4  # admitted calls (one generating, the rest waiting); below the server's 5+ threads
DEADLINE_MARGIN_S = 2.0  # answer before the server's own 504, which would name nothing
DEVICE_ENV = "MWPGEN_DEVICE"  # auto (default) | cpu | cuda, for the serving process
OUTPUT_SCHEMA = Schema([
    ColSpec("long", "request"), ColSpec("long", "rank"), ColSpec("string", "equation"), ColSpec("string", "given"),
    ColSpec("string", "context"), ColSpec("string", "text"), ColSpec("string", "masked_text"),
    ColSpec("boolean", "verified", required=False), ColSpec("string", "parsed_equation", required=False),
    ColSpec("string", "answer", required=False), ColSpec(Map("string"), "numbers"),
    ColSpec("double", "log_likelihood"), ColSpec("double", "judge_probability", required=False),
    ColSpec("double", "judge_threshold", required=False), ColSpec("string", "verified_note", required=False),
])
SIGNATURE = ModelSignature(inputs=None, outputs=OUTPUT_SCHEMA)  # no input schema: see "Errors" above
INPUT_EXAMPLE = {"equation": ["x = num1 + num2"], "context": ["apples basket"], "n": [1], "seed": [0],
                 "numbers": ["auto"]}


def request_timeout_s() -> float:
    """The scoring server's own timeout for a call (mlflow models serve reads the same variable)."""
    return float(MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.get())


def decoded_sequences(request) -> int:
    """The sequences decoding a request carries at once: its beams for beam search, else its candidates."""
    return request.num_beams if request.decoding == "beam" else request.candidates


class OursModel(PythonModel):
    """mwpgen.generate.service.Service behind MLflow's pyfunc interface (model_input: a DataFrame of requests)."""

    def load_context(self, context) -> None:
        from mwpgen.generate.service import Service

        self.service = Service.load(context.artifacts["bundle"], os.environ.get(DEVICE_ENV, "auto"),
                                    judge=context.artifacts.get("judge"))  # logged without one: the rule
        self.lock = threading.Lock()  # one generation at a time
        self.admitted = threading.BoundedSemaphore(MAX_CALLS_IN_FLIGHT)

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        """Problems for the requests; the DataFrame hint only tells MLflow not to infer a schema from hints."""
        deadline = time.monotonic() + request_timeout_s() - DEADLINE_MARGIN_S
        requests = self.checked_requests(model_input, params)
        if not self.admitted.acquire(blocking=False):
            raise busy(f"busy: {MAX_CALLS_IN_FLIGHT} calls are already in progress or waiting")
        try:
            return self.answer(requests, deadline)
        finally:
            self.admitted.release()

    def checked_requests(self, model_input, params=None) -> list:
        rows = request_rows(model_input, params)
        if not rows:
            raise bad_request(f"no requests: send {EXAMPLE}")
        if len(rows) > MAX_ROWS:
            raise bad_request(f"{len(rows)} requests in one call (limit {MAX_ROWS}); split them")
        requests = []
        for i, row in enumerate(rows):
            try:
                requests.append(self.service.check(parse_request(row)))
            except RequestError as e:
                raise bad_request(f"request {i}: {e}") from None
        asked = sum(r.candidates for r in requests)
        if asked > MAX_CANDIDATES_PER_CALL:
            raise bad_request(f"the call asks for {asked} candidates (max(n, verify) summed over its requests; limit "
                       f"{MAX_CANDIDATES_PER_CALL} a call, to answer within the server's "
                       f"{request_timeout_s():.0f} s timeout); split it")
        tokens = sum(decoded_sequences(r) * r.max_new_tokens for r in requests)
        if tokens > MAX_CANDIDATE_TOKENS_PER_CALL:
            raise bad_request(f"the call may decode {tokens} tokens (max(n, verify), or num_beams, times "
                              f"max_new_tokens, summed over its requests; limit {MAX_CANDIDATE_TOKENS_PER_CALL} a "
                              f"call, to answer within the server's {request_timeout_s():.0f} s timeout); ask for "
                              "fewer candidates or max_new_tokens, or split it")
        return requests

    def answer(self, requests: list, deadline: float) -> pd.DataFrame:
        from mwpgen.generate.service import DeadlineExceeded

        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise busy("busy: the calls ahead of this one did not finish before its deadline")
        try:
            problems = [p for i, r in enumerate(requests) for p in self.service.answer(r, i, deadline)]
        except DeadlineExceeded as e:  # the server has given up on this call: stop working on it
            raise deadline_exceeded(f"not done within the server's {request_timeout_s():.0f} s request timeout ({e}); "
                                    "ask for fewer candidates (n, verify) or requests a call") from None
        except Exception as e:  # a bug, not the caller's fault: one line, no traceback in the answer
            raise generation_failed(f"generation failed: {type(e).__name__}: {e}") from None
        finally:
            self.lock.release()
        return pd.DataFrame([p.record() for p in problems], columns=OUTPUT_SCHEMA.input_names())


def requirements() -> list[str]:
    """The serving environment's pins (the code itself travels in the model's code/ folder)."""
    pins = []
    for name in ("mlflow", "torch", "transformers", "tokenizers", "safetensors", "sympy", "pandas", "pydantic",
                 "pyyaml", "tqdm"):
        try:
            pins.append(f"{name}=={version(name).split('+')[0]}")  # torch 2.13.0+cpu: no local tag on PyPI
        except PackageNotFoundError:
            pins.append(name)
    return pins


def training_run_id(model: str, dataset: str, fold: int) -> str | None:
    """The newest fold run (tracking.runs.fold_run, key `<model>/<dataset>/fold<k>`) whose train stage finished:
    the run that trained the model in models/<model>/<dataset>/fold<k>. None when this store has none."""
    c = client()
    query = f"tags.`mwpgen.key` = '{model}/{dataset}/fold{fold}' and tags.`mwpgen.stage.train` = 'done'"
    runs = c.search_runs([experiment_id(c)], query, max_results=1, order_by=["attributes.start_time DESC"])
    return runs[0].info.run_id if runs else None


def log_ours_model(bundle_dir: Path, run_id: str, dataset: str, fold: int, name: str = MLFLOW_MODEL_NAME,
                   judge_dir: Path | None = None) -> dict:
    """Log the bundle (with the learned judge in `judge_dir`, if any) as a pyfunc model of run `run_id`, register it
    as `name`, alias the version `<dataset>-fold<k>` and tag the run with the model URI. Returns where it went."""
    with pointed_at(tracking_uri()):
        return _log_ours_model(bundle_dir, run_id, dataset, fold, name, judge_dir)


def _log_ours_model(bundle_dir: Path, run_id: str, dataset: str, fold: int, name: str,
                    judge_dir: Path | None) -> dict:
    c = client()
    run = c.get_run(run_id)
    # Created here, in the run's experiment: Model.log alone would file it under the process's active experiment.
    logged = c.create_logged_model(run.info.experiment_id, name, source_run_id=run_id, params=run.data.params,
                                   tags={"dataset": dataset, "fold": str(fold)}, model_type=MLFLOW_MODEL_NAME)
    info = Model.log(artifact_path=None, name=name, flavor=mlflow.pyfunc, run_id=run_id, model_id=logged.model_id,
                     registered_model_name=name, python_model=str(SERVED_MODEL_CODE),
                     artifacts={"bundle": str(bundle_dir), **({"judge": str(judge_dir)} if judge_dir else {})},
                     code_paths=[str(PROJECT_ROOT / "mwpgen"), str(PROJECT_ROOT / "tracking")],
                     signature=SIGNATURE, input_example=pd.DataFrame(INPUT_EXAMPLE),
                     pip_requirements=requirements(),
                     metadata={"dataset": dataset, "fold": fold, "request_fields": list(FIELDS),
                               "max_problems_per_request": MAX_N, "max_verify_per_request": MAX_VERIFY,
                               "max_requests_per_call": MAX_ROWS, "max_candidates_per_call": MAX_CANDIDATES_PER_CALL,
                               "max_candidate_tokens_per_call": MAX_CANDIDATE_TOKENS_PER_CALL,
                               "max_calls_in_flight": MAX_CALLS_IN_FLIGHT,
                               "judge": "learned" if judge_dir else "rule"})
    v = str(info.registered_model_version)
    for key, value in {"dataset": dataset, "fold": str(fold), "run_id": run_id, "bundle": str(bundle_dir),
                       "judge": str(judge_dir) if judge_dir else "rule"}.items():
        c.set_model_version_tag(name, v, key, value)
    alias = f"{dataset}-fold{fold}"
    c.set_registered_model_alias(name, alias, v)
    c.set_tag(run_id, "mwpgen.registered_model", f"models:/{name}/{v}")
    return {"dataset": dataset, "fold": fold, "name": name, "version": int(v), "model_uri": f"models:/{name}/{v}",
            "alias_uri": f"models:/{name}@{alias}", "model_id": info.model_id, "run_id": run_id,
            "judge": "learned" if judge_dir else "rule"}
