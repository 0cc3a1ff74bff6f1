"""Issue S2 ("hostile input, round two"), the served model: `params` sent beside the records and the `inputs` /
`instances` JSON forms (item 13), a busy answer's class and retry advice (22). Without a server: `predict` is
called with what the scoring server hands it (tests/pipeline/test_pyfunc_serve.py posts the same bodies to a real
one)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tests.helpers.tiny_bundle import tiny_served_model

GOOD = {"equation": "x = 12 - 5", "context": "Joan", "max_new_tokens": 8}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return tiny_served_model(tmp_path_factory.mktemp("t"))


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


# ---------------------------------------------------------------------------------------------- 4. deadline, cost

def test_a_call_that_cannot_decode_in_time_is_refused_at_once_by_its_tokens(served):
    from tracking.pyfunc_model import MAX_CANDIDATE_TOKENS_PER_CALL

    status, answer = _answer(served, pd.DataFrame([{**GOOD, "verify": 64, "max_new_tokens": 256}]))
    assert status == 400 and answer["message"].startswith(f"the call may decode 16384 tokens (max(n, verify), or "
                                                          "num_beams, times max_new_tokens, summed over its requests; "
                                                          f"limit {MAX_CANDIDATE_TOKENS_PER_CALL} a call")
    beams = {**GOOD, "decoding": "beam", "num_beams": 16, "max_new_tokens": 256}  # one problem, 16 sequences
    status, answer = _answer(served, pd.DataFrame([beams, beams]))
    assert status == 400 and "the call may decode 8192 tokens" in answer["message"]
    served.checked_requests(pd.DataFrame([{**GOOD, "verify": 64, "max_new_tokens": 80}]))  # the README's budget


def _texts(n: int) -> list[str]:
    words = "Joan found num1 shells on the beach and gave num2 to Sam".split()
    return [" ".join(words[: 3 + i % len(words)]) + f" {'more ' * (i % 5)}?" for i in range(n)]


def test_the_rule_reads_in_batches_that_are_one_calls_and_stops_between_them_at_the_deadline(served, monkeypatch):
    import math

    import mwpgen.generate.service as service_module
    from mwpgen.generate.service import DeadlineExceeded
    from mwpgen.judge.rule import equation_logprobs
    from mwpgen.lm.decoding import predict_equations

    service, texts = served.service, _texts(40)
    one_call = predict_equations(service.mwp2eq, service.tokenizer, texts, batch_size=16, device=service.device)
    assert service.parse(texts, deadline=math.inf) == one_call  # the same readings, bit for bit
    whole = equation_logprobs(service.mwp2eq, service.tokenizer, texts, ["x = num1 - num2"] * 40, batch_size=16)
    assert service.equation_firmness(texts, "x = num1 - num2", math.inf) == [s / max(n, 1) for s, n in whole]

    for phase, run in (("parse", lambda: service.parse(texts, deadline=1e18)),
                       ("firmness", lambda: service.equation_firmness(texts, "x = num1 - num2", deadline=1e18))):
        batches = []
        real = {"parse": service_module.predict_equations, "firmness": service_module.equation_logprobs}[phase]

        def one_batch_then_past_the_deadline(*args, real=real, batches=batches, **kwargs):
            batches.append(len(args[2]))
            monkeypatch.setattr(service_module, "time", SimpleNamespace(monotonic=lambda: math.inf))
            return real(*args, **kwargs)

        with monkeypatch.context() as m:
            m.setattr(service_module, {"parse": "predict_equations", "firmness": "equation_logprobs"}[phase],
                      one_batch_then_past_the_deadline)
            with pytest.raises(DeadlineExceeded, match="while the rule"):
                run()
        monkeypatch.undo()
        assert batches == [16], (phase, batches)  # the first of three batches, then it stopped
