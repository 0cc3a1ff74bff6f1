"""Checks the fault tests of `mwpgen generate` and the served model share: a one-line error, a served error's
answer, a request file of n rows, a Service that fails at one row."""

from __future__ import annotations

import json

import pytest


def one_line_error(code: int, out: str, err: str, expected: str, exit_code: int = 2) -> None:
    assert code == exit_code and out == "", (code, err)
    assert err.count("\n") == 1 and err.startswith("mwpgen: error: ") and "Traceback" not in err, err
    assert expected in err, err
    assert len(err) < 400, err  # names the field; never echoes a 5,000-digit number


def served_error(served, rows, status: int, expected: str):
    import pandas as pd
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException) as caught:
        served.predict(None, pd.DataFrame(rows))
    e = caught.value
    e.message = f"Failed to predict data '{pd.DataFrame(rows)}'. \nError: {e.message}"  # as the scoring server does
    answer = json.loads(e.serialize_as_json())
    assert e.get_http_status_code() == status and expected in answer["message"], answer
    assert "\n" not in answer["message"] and "Failed to predict" not in answer["message"]
    return answer


def rows_file(tmp_path, n: int, name: str = "partial.csv"):
    path = tmp_path / name
    path.write_text("equation,context,seed\n" + "".join(f"x = {i + 2} + 3,apples,{i}\n" for i in range(n)),
                    encoding="utf-8")
    return path


def fail_at(monkeypatch, index: int, error: BaseException):
    from mwpgen.generate.service import Service

    answer = Service.answer

    def failing(self, request, i=0, deadline=None):
        if i == index:
            raise error
        return answer(self, request, i, deadline)

    monkeypatch.setattr(Service, "answer", failing)
