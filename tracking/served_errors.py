"""The served model's errors: one line each, with the HTTP status of its MLflow error code and an error_class that
says what happened (MLflow derives CLIENT_INTERNAL_ERROR for a 503, which reads as a bug in the caller).

The scoring server turns an MlflowException from predict into its error code's HTTP status with the exception's
JSON, after prefixing the message with a dump of the input DataFrame; OneLineError (through MlflowException's public
`serialize_as_json`) answers with the one line. MLflow's server sets no headers from an exception, so a busy
answer's "retry after" travels in the body (`retry_after_s`) and its message; tracking/serve.py also sends it as
`Retry-After`."""

from __future__ import annotations

import json

from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import (
    DEADLINE_EXCEEDED,
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    TEMPORARILY_UNAVAILABLE,
)

RETRY_AFTER_S = 5  # a busy call's advice: about one verify-8 call's time on the README's 2-core CPU


class OneLineError(MlflowException):
    """An error answered with its own one-line message: the scoring server rewrites `message` of an exception from
    predict to "Failed to predict data '<the whole DataFrame>'. Error: ..." before serializing it."""

    def __init__(self, message: str, error_code: int, error_class: str | None = None, **body):
        super().__init__(" ".join(message.split()), error_code=error_code, error_class=error_class, **body)
        self.one_line = self.message

    def serialize_as_json(self) -> str:
        return json.dumps(json.loads(super().serialize_as_json()) | {"message": self.one_line})


def bad_request(message: str) -> OneLineError:
    """400: what the caller can fix (the message names the request and field)."""
    return OneLineError(message, INVALID_PARAMETER_VALUE)


def busy(message: str) -> OneLineError:
    """503: nothing wrong with the call; the server is full now."""
    return OneLineError(f"{message}; retry in {RETRY_AFTER_S} s", TEMPORARILY_UNAVAILABLE,
                        error_class="TEMPORARILY_UNAVAILABLE", retry_after_s=RETRY_AFTER_S)


def deadline_exceeded(message: str) -> OneLineError:
    """504: the call did not finish within the server's timeout; its work has stopped."""
    return OneLineError(message, DEADLINE_EXCEEDED, error_class="DEADLINE_EXCEEDED")


def generation_failed(message: str) -> OneLineError:
    """500: a bug or a broken environment, not the caller's fault (one line, no traceback)."""
    return OneLineError(message, INTERNAL_ERROR, error_class="PREDICTION_FUNCTION_FAILED")
