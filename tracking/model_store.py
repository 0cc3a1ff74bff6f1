"""Fetching a logged or registered model out of MLflow for `mwpgen generate --model models:/...` (or runs:/...).

The command line (mwpgen/generate/model_resolution.py) imports this module only when --model names an MLflow model,
so generating from a bundle folder never loads MLflow. The store is tracking.runs.tracking_uri(): MLFLOW_TRACKING_URI,
default the project's mlflow.db.

A tracking server that cannot be reached is said at once: MLflow's HTTP client retries a refused connection with
exponential backoff (MLFLOW_HTTP_REQUEST_MAX_RETRIES = 7 by default: about four minutes of silence), so the server's
address is tried once here first. A server that answers with errors (5xx, 429) is retried twice, a second apart, and
a request waits at most 30 s, unless MLFLOW_HTTP_REQUEST_MAX_RETRIES, _BACKOFF_FACTOR or _TIMEOUT say otherwise:
a person waits on this command.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from tracking.runs import tracking_uri

CONNECT_TIMEOUT_S = 5.0  # one try at the tracking server's address, before MLflow's own retries
PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"  # off: the command line's stderr is for its own lines
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}  # MLflow's documented settings; the user's own win


class ModelStoreError(Exception):
    """The model could not be fetched; the message names the URI, the store and why, in one line."""


def download_model(uri: str, dst: Path) -> Path:
    """The MLflow model at `uri` (models:/NAME/VERSION, models:/NAME@ALIAS or runs:/RUN/PATH) downloaded into `dst`;
    returns the model's folder."""
    store = tracking_uri()
    check_reachable(store)
    from mlflow.artifacts import download_artifacts  # here: only a fetch pays for importing MLflow
    from mlflow.exceptions import MlflowException

    from tracking.mlflow_uris import pointed_at

    try:
        # pointed_at: resolving a models:/ URI reads MLflow's fluent registry URI, whatever registry_uri says
        with pointed_at(store), _environment({PROGRESS_BAR_ENV: "false"} |
                                             {k: os.environ.get(k, v) for k, v in HTTP_DEFAULTS.items()}):
            return Path(download_artifacts(artifact_uri=uri, dst_path=str(dst), tracking_uri=store,
                                           registry_uri=store))
    except (MlflowException, OSError) as e:
        reason = " ".join(str(e).split())[:500]
        raise ModelStoreError(f"could not fetch {uri} from MLflow at {store}: {reason}") from None


def check_reachable(store: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """An http(s) tracking server that refuses or does not answer a connection, named now (a file store: nothing)."""
    parsed = urlparse(store)
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
            pass
    except OSError as e:  # refused, unreachable, unknown host, or no answer within timeout_s
        why = f"no answer within {timeout_s:.0f} s" if isinstance(e, TimeoutError) else (
            e.strerror or type(e).__name__)
        raise ModelStoreError(f"cannot reach the MLflow tracking server at {store} ({why}); start it, or set "
                              "MLFLOW_TRACKING_URI to one that runs") from None


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` for the duration (MLflow reads its settings from there), then as it was."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
