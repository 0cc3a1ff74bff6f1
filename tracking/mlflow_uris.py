"""MLflow's process-wide URIs pointed at one store for the duration of a call.

Some of MLflow's calls read the fluent tracking and registry URIs rather than the ones passed to them (Model.log and
registration; resolving a models:/ URI on download), so a call that must reach the project's store sets both. After
it, both are put back. MLflow's getters return the effective URI (derived from MLFLOW_TRACKING_URI when none was
set), so putting back what they returned pins it: a later change of MLFLOW_TRACKING_URI (the tests' scratch stores,
a user's shell) would no longer be seen by the process. Nothing public unsets them, so every call that needs the
store sets them again through `pointed_at`, rather than trusting what an earlier call left.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import mlflow

URI_VARIABLES = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


@contextmanager
def pointed_at(uri: str) -> Iterator[None]:
    """MLflow's tracking and registry URIs set to `uri`, then put back. MLflow's setters also write
    MLFLOW_TRACKING_URI / MLFLOW_REGISTRY_URI into os.environ, which tracking.runs.tracking_uri() reads: those are put
    back as they were too, or restoring a stale fluent URI would redirect every later client."""
    before = mlflow.get_tracking_uri(), mlflow.get_registry_uri()
    env_before = {k: os.environ.get(k) for k in URI_VARIABLES}
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before[0])
        mlflow.set_registry_uri(before[1])
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
