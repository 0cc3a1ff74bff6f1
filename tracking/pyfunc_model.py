"""The trained ours as an MLflow pyfunc model: logged beside the run that trained it, registered as `mwpgen-ours`,
served by `mlflow models serve -m models:/mwpgen-ours/<version> --env-manager local`.

    POST /invocations  {"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples basket", "n": 2}]}
    -> {"predictions": [{"request": 0, "rank": 1, "text": "...", "verified": true, "parsed_equation": "...",
                         "answer": "7", "numbers": {"num1": "12", "num2": "5"}, ...}, ...]}

One row per request (the fields of mwpgen.generate.request.Request: equation and context, optionally n, seed, numbers,
verify, decoding, top_p, temperature, num_beams, max_new_tokens), one output row per problem
(mwpgen.generate.service.Problem), the same code path as `mwpgen generate`.

The model folder holds the bundle (artifacts/bundle: generator, selector, co-trained mwp2eq) and a copy of the
code it was logged with (code/mwpgen, code/tasks), so a registered version keeps answering as it did when it was
registered, whatever the repository holds later; the third-party packages are pinned in its requirements.

Errors. The scoring server turns an MlflowException into its error code's HTTP status with the message as JSON,
and any other exception into a 400 that carries the traceback. So `predict` turns a bad request into
INVALID_PARAMETER_VALUE (400, one line naming the request and the field) and an unexpected failure into
INTERNAL_ERROR (500, one line, no traceback). Requests are answered one at a time (a lock): the server runs them
in threads, and seeded sampling shares torch's global generator.

No Prefect here: a serving process imports this module to unpickle the model (flows/register.py wraps
`log_ours_model` as a task).
"""

from __future__ import annotations

import math
import os
import threading
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterator

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE
from mlflow.pyfunc import PythonModel
from mlflow.types.schema import ColSpec, Map, Schema

from mwpgen.generate.cli import MLFLOW_MODEL_NAME
from mwpgen.generate.request import MAX_N, RequestError, parse_request
from mwpgen.paths import PROJECT_ROOT
from tracking.runs import client, experiment_id, tracking_uri

MAX_ROWS = 32  # requests per call: a bigger batch would outlive the server's request timeout (60 s by default)
DEVICE_ENV = "MWPGEN_DEVICE"  # auto (default) | cpu | cuda, for the serving process

# The optional numbers are doubles (whole numbers are checked by mwpgen.generate.request): rows of one call may
# each leave out different ones, and pandas holds a missing cell as NaN, which an integer column refuses.
INPUT_SCHEMA = Schema([
    ColSpec("string", "equation"), ColSpec("string", "context"),
    *(ColSpec("double", name, required=False) for name in ("n", "seed", "verify", "num_beams", "max_new_tokens")),
    ColSpec("string", "numbers", required=False), ColSpec("string", "decoding", required=False),
    ColSpec("double", "top_p", required=False), ColSpec("double", "temperature", required=False),
])
OUTPUT_SCHEMA = Schema([
    ColSpec("long", "request"), ColSpec("long", "rank"), ColSpec("string", "equation"), ColSpec("string", "given"),
    ColSpec("string", "context"), ColSpec("string", "text"), ColSpec("string", "masked_text"),
    ColSpec("boolean", "verified", required=False), ColSpec("string", "parsed_equation", required=False),
    ColSpec("string", "answer", required=False), ColSpec(Map("string"), "numbers"),
    ColSpec("double", "log_likelihood"),
])
SIGNATURE = ModelSignature(inputs=INPUT_SCHEMA, outputs=OUTPUT_SCHEMA)
INPUT_EXAMPLE = {"equation": ["x = num1 + num2"], "context": ["apples basket"], "n": [1], "seed": [0],
                 "numbers": ["auto"]}


def _bad(message: str) -> MlflowException:
    return MlflowException(" ".join(message.split()), error_code=INVALID_PARAMETER_VALUE)


def _rows(model_input) -> list[dict]:
    """The request records of whatever pyfunc hands us (a DataFrame from the server; dicts when called directly),
    with pandas' NaN for a missing cell turned back into None."""
    if hasattr(model_input, "to_dict"):
        columns = [str(c) for c in getattr(model_input, "columns", [])]
        twice = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
        if twice is not None:  # to_dict would keep one of them, silently (as a CSV or JSONL request file may not)
            raise _bad(f"column {twice!r} is given twice; keep one")
        records = model_input.to_dict(orient="records")
    elif isinstance(model_input, dict):
        records = [model_input]
    elif isinstance(model_input, list) and all(isinstance(r, dict) for r in model_input):
        records = model_input
    else:
        raise _bad(f"expected request rows with an equation and a context, got {type(model_input).__name__}")
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in records]


class OursModel(PythonModel):
    """mwpgen.generate.service.Service behind MLflow's pyfunc interface (model_input: a DataFrame of requests)."""

    def load_context(self, context) -> None:
        from mwpgen.generate.service import Service

        self.service = Service.load(context.artifacts["bundle"], os.environ.get(DEVICE_ENV, "auto"))
        self.lock = threading.Lock()

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        """Problems for the requests; the DataFrame hint only tells MLflow not to infer a schema from hints (the
        logged signature has it)."""
        rows = _rows(model_input)
        if not rows:
            raise _bad('no requests: send {"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples"}]}')
        if len(rows) > MAX_ROWS:
            raise _bad(f"{len(rows)} requests in one call (limit {MAX_ROWS}); split them")
        requests = []
        for i, row in enumerate(rows):
            try:
                requests.append(self.service.check(parse_request(row)))
            except RequestError as e:
                raise _bad(f"request {i}: {e}") from None
        try:
            with self.lock:
                problems = [p for i, r in enumerate(requests) for p in self.service.answer(r, i)]
        except Exception as e:  # a bug, not the caller's fault: one line, no traceback in the answer
            raise MlflowException(f"generation failed: {type(e).__name__}: {' '.join(str(e).split())}",
                                  error_code=INTERNAL_ERROR) from None
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


def log_ours_model(bundle_dir: Path, run_id: str, dataset: str, fold: int, name: str = MLFLOW_MODEL_NAME) -> dict:
    """Log the bundle as a pyfunc model of run `run_id`, register it as `name`, alias the version
    `<dataset>-fold<k>` and tag the run with the model URI. Returns where it went."""
    with _fluent_uris(tracking_uri()):
        return _log_ours_model(bundle_dir, run_id, dataset, fold, name)


@contextmanager
def _fluent_uris(uri: str) -> Iterator[None]:
    """Model.log and registration read MLflow's process-wide URIs: point them at our store, then put them back."""
    before = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])


def _log_ours_model(bundle_dir: Path, run_id: str, dataset: str, fold: int, name: str) -> dict:
    c = client()
    run = c.get_run(run_id)
    # Created here, in the run's experiment: Model.log alone would file it under the process's active experiment.
    logged = c.create_logged_model(run.info.experiment_id, name, source_run_id=run_id, params=run.data.params,
                                   tags={"dataset": dataset, "fold": str(fold)}, model_type="mwpgen-ours")
    info = Model.log(artifact_path=None, name=name, flavor=mlflow.pyfunc, run_id=run_id, model_id=logged.model_id,
                     registered_model_name=name, python_model=OursModel(), artifacts={"bundle": str(bundle_dir)},
                     code_paths=[str(PROJECT_ROOT / "mwpgen"), str(PROJECT_ROOT / "tracking")],
                     signature=SIGNATURE, input_example=pd.DataFrame(INPUT_EXAMPLE),
                     pip_requirements=requirements(),
                     metadata={"dataset": dataset, "fold": fold, "max_problems_per_request": MAX_N,
                               "max_requests_per_call": MAX_ROWS})
    v = str(info.registered_model_version)
    for key, value in {"dataset": dataset, "fold": str(fold), "run_id": run_id, "bundle": str(bundle_dir)}.items():
        c.set_model_version_tag(name, v, key, value)
    alias = f"{dataset}-fold{fold}"
    c.set_registered_model_alias(name, alias, v)
    c.set_tag(run_id, "mwpgen.registered_model", f"models:/{name}/{v}")
    return {"dataset": dataset, "fold": fold, "name": name, "version": int(v), "model_uri": f"models:/{name}/{v}",
            "alias_uri": f"models:/{name}@{alias}", "model_id": info.model_id, "run_id": run_id}
