"""The request rows of a call to the served model, from whatever MLflow's pyfunc hands `predict`.

The scoring server accepts four JSON forms; each becomes plain records here, so that mwpgen.generate.request checks
every field by name in every form:
* `dataframe_records` / `dataframe_split`: a DataFrame (pandas' NaN for a cell a row leaves out turned back into
  None; a column given twice refused, as in a CSV request file);
* `inputs` as a list of objects: a list of dicts whose values are numpy 0-d arrays;
* `instances` (or `inputs` as columns): a dict of equal-length numpy arrays, one per field.
`params` is not read (the model declares no params schema, so MLflow hands predict an empty dict for any): a call that
sends some is refused, naming where its fields go, rather than answered as if they were not there.
"""

from __future__ import annotations

import math

from tracking.served_errors import bad_request

EXAMPLE = '{"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples", "verify": 8}]}'


def request_rows(model_input, params=None) -> list[dict]:
    """The call's request records, each a dict of plain Python values."""
    if params is not None:  # None: the call sent no params; {}: MLflow dropped those it sent (see above)
        raise bad_request(f"params are not read: give the fields (n, verify, ...) in each request record, as in "
                          f"{EXAMPLE}")
    if hasattr(model_input, "to_dict"):
        return _dataframe_rows(model_input)
    if isinstance(model_input, dict) and model_input and all(_is_column(v) for v in model_input.values()):
        return _column_rows(model_input)
    if isinstance(model_input, dict):
        return [_plain(model_input)]
    if isinstance(model_input, list) and all(isinstance(r, dict) for r in model_input):
        return [_plain(r) for r in model_input]
    raise bad_request(f"expected request rows with an equation and a context, got {type(model_input).__name__}; "
                      f"send {EXAMPLE}")


def _dataframe_rows(frame) -> list[dict]:
    columns = [str(c) for c in getattr(frame, "columns", [])]
    twice = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
    if twice is not None:  # to_dict would keep one of them, silently (as a CSV or JSONL request file may not)
        raise bad_request(f"column {twice!r} is given twice; keep one")
    records = frame.to_dict(orient="records")
    _refuse_nan_columns(columns, records)
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in records]


def _refuse_nan_columns(columns: list[str], records: list[dict]) -> None:
    """pandas writes NaN for a cell a row leaves out, so a NaN cell reads as a missing field. A JSON column that is
    NaN in EVERY row was sent as NaN (a key no row has makes no column, a null is None): refused, as the command
    line refuses --top-p nan. A NaN beside real values in other rows cannot be told from a missing cell: it takes
    the default."""
    for name in columns if records else []:
        cells = [r.get(name) for r in records]
        if all(isinstance(v, float) and math.isnan(v) for v in cells):
            raise bad_request(f"request 0: {name}: expected a finite number, got NaN (a CSV column empty in every row "
                              "reads as NaN too: leave such a column out)")


def _is_column(value) -> bool:
    return getattr(value, "ndim", None) == 1


def _column_rows(columns: dict) -> list[dict]:
    """`instances` / columnar `inputs`: one numpy array per field, a row per index."""
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise bad_request("the fields' columns have different lengths; send one record per request: " + EXAMPLE)
    return [{str(k): _plain_value(v[i]) for k, v in columns.items()} for i in range(lengths.pop())]


def _plain(record: dict) -> dict:
    return {k: _plain_value(v) for k, v in record.items()}


def _plain_value(value):
    """A numpy scalar or array as the Python value it holds (a 0-d array's item, an array's list)."""
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, (str, bytes)) else value
