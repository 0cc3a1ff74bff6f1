"""Issue S2 ("hostile input, round two"), the served model: `params` sent beside the records and the `inputs` /
`instances` JSON forms (item 13), a busy answer's class and retry advice (22). Without a server: `predict` is
called with what the scoring server hands it (tests/test_pyfunc_serve.py posts the same bodies to a real one)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from test_generate_cli import make_tiny_bundle

GOOD = {"equation": "x = 12 - 5", "context": "Joan", "max_new_tokens": 8}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tracking.pyfunc_model import OursModel

    model = OursModel()
    model.load_context(SimpleNamespace(artifacts={"bundle": str(make_tiny_bundle(tmp_path_factory.mktemp("t") /
                                                                                  "ours"))}))
    return model


def _answer(served, model_input, params=None) -> tuple[int, dict]:
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException) as caught:
        served.predict(None, model_input, params)
    return caught.value.get_http_status_code(), json.loads(caught.value.serialize_as_json())


# ---------------------------------------------------------------------------------------------- 13. forms, params

def test_params_beside_the_records_are_refused_not_ignored(served):
    # MLflow hands predict {} for params it dropped (the model declares no params schema), None for none sent
    status, answer = _answer(served, pd.DataFrame([GOOD]), params={})
    assert status == 400 and answer["message"].startswith("params are not read: give the fields (n, verify, ...) in "
                                                          "each request record")
    assert len(served.predict(None, pd.DataFrame([GOOD]), None)) == 1


def test_the_inputs_and_instances_forms_are_read_as_records(served):
    # what the scoring server hands predict for {"inputs": [{...}]}: a list of dicts of numpy 0-d arrays
    records = [{k: np.array(v) for k, v in GOOD.items()}]
    direct = served.predict(None, pd.DataFrame([GOOD]))
    assert served.predict(None, records).to_dict("records") == direct.to_dict("records")
    # for {"instances": [{...}, {...}]} or columnar "inputs": a dict of equal-length numpy arrays
    columns = {k: np.array([v, v]) for k, v in GOOD.items()} | {"seed": np.array([0, 1])}
    out = served.predict(None, columns)
    assert list(out["request"]) == [0, 1] and out["text"].iloc[0] == direct["text"].iloc[0]


def test_a_bad_field_in_the_inputs_form_is_named_not_a_numpy_array(served):
    status, answer = _answer(served, [{"equation": np.array("x = 12 -"), "context": np.array("Joan")}])
    assert status == 400 and answer["message"].startswith("request 0: equation: expected a number")
    assert "array" not in answer["message"]
    status, answer = _answer(served, {"equation": np.array(["x = 12 - 5"]), "context": np.array(["Joan", "Tom"])})
    assert status == 400 and "the fields' columns have different lengths" in answer["message"]


# ---------------------------------------------------------------------------------------------- 22. busy

def test_a_busy_answer_is_classed_temporarily_unavailable_and_says_when_to_retry(served):
    from tracking.pyfunc_model import MAX_CALLS_IN_FLIGHT
    from tracking.served_errors import RETRY_AFTER_S

    for _ in range(MAX_CALLS_IN_FLIGHT):
        served.admitted.acquire()
    try:
        status, answer = _answer(served, pd.DataFrame([GOOD]))
    finally:
        for _ in range(MAX_CALLS_IN_FLIGHT):
            served.admitted.release()
    assert status == 503 and answer["error_class"] == "TEMPORARILY_UNAVAILABLE"
    assert answer["retry_after_s"] == RETRY_AFTER_S and answer["message"].endswith(f"retry in {RETRY_AFTER_S} s")


def test_a_failure_is_classed_as_the_prediction_failing(served, monkeypatch):
    from mwpgen.generate.service import Service

    monkeypatch.setattr(Service, "answer", lambda self, *a, **k: 1 / 0)
    status, answer = _answer(served, pd.DataFrame([GOOD]))
    assert status == 500 and answer["error_class"] == "PREDICTION_FUNCTION_FAILED"
    assert answer["message"] == "generation failed: ZeroDivisionError: division by zero"
