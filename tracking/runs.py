"""MLflow logging with explicit run ids.

MLflow's active run is per thread and Prefect runs tasks in worker threads, so nothing here uses
`mlflow.start_run`: every call names its run id through an `MlflowClient`.

The store defaults to a sqlite file at an absolute path inside the project (a relative URI would be lost under
`dvc exp run --temp`, which runs in a copy of the project); artifacts go to `mlartifacts/` beside it.
A pipeline run exports its run id as MWPGEN_PARENT_RUN_ID so the stage runs that `dvc repro` starts
become its children.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import urlparse

from mwpgen.paths import PROJECT_ROOT

if TYPE_CHECKING:  # annotations only: any mlflow import runs all of mlflow/__init__ (~1 s), left to client()
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

EXPERIMENT = os.environ.get("MWPGEN_EXPERIMENT", "mwpgen")
PARENT_ENV = "MWPGEN_PARENT_RUN_ID"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{PROJECT_ROOT / 'mlflow.db'}"


def _artifact_root(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        db = Path(uri[len("sqlite:///"):])
        return (db.parent / "mlartifacts").as_uri()
    return (PROJECT_ROOT / "mlartifacts").as_uri()


def client() -> MlflowClient:
    from mlflow.tracking import MlflowClient  # here, not at import: a stage that logs no run never loads MLflow

    return MlflowClient(tracking_uri())


# MLflow 3's experiment kind, the tag its UI's kind selector writes ("Machine learning"; the other is
# "genai_development"): key and value as in mlflow/server/js/build of mlflow 3.17.2. It marks this as a
# model-training experiment. But 3.17.2's UI (its feature flag on) takes the kind from the sidebar's global
# "GenAI | Model training" switch instead (the URL's `workflowType`, else the browser's localStorage
# `mlflow.workflowType`, default GenAI), so what opens the experiment on its runs there is ui_url's
# `?workflowType=machine_learning` (checked in headless Chromium: scripts/screenshot_mlflow_ui.py, docs/mlflow_ui/).
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
UI_WORKFLOW = "machine_learning"  # the UI's "Model training" side


def ui_url(base: str = "http://127.0.0.1:5000", c: MlflowClient | None = None) -> str:
    """The MLflow UI page of the mwpgen experiment's runs table (its experiment list when there is no such
    experiment yet); nothing is created."""
    base = base.rstrip("/")
    exp = (c or client()).get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return f"{base}/#/experiments?workflowType={UI_WORKFLOW}"
    return f"{base}/#/experiments/{exp.experiment_id}/runs?workflowType={UI_WORKFLOW}"


def experiment_id(c: MlflowClient) -> str:
    from mlflow.exceptions import MlflowException  # loaded already: `c` is a client

    exp = c.get_experiment_by_name(EXPERIMENT)
    if exp is not None:
        if EXPERIMENT_KIND_TAG not in exp.tags:  # made before the tag (or elsewhere); a kind chosen in the UI stays
            c.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return exp.experiment_id
    try:
        return c.create_experiment(EXPERIMENT, artifact_location=_artifact_root(tracking_uri()),
                                   tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
    except MlflowException as e:
        if e.error_code != "RESOURCE_ALREADY_EXISTS":  # another stage process created it first: fine
            raise
        return c.get_experiment_by_name(EXPERIMENT).experiment_id


def _is_param_change(e: MlflowException) -> bool:
    """MLflow's refusal to overwrite a logged param with another value (and only that)."""
    return e.error_code == "INVALID_PARAMETER_VALUE" and "Changing param values is not allowed" in str(e)


def _flatten(prefix: str, obj: Any) -> dict[str, str]:
    if isinstance(obj, dict):
        out: dict[str, str] = {}
        for k, v in obj.items():
            out.update(_flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: str(obj)[:6000]}


class StageRun:
    """One MLflow run; every method takes effect on this run id, whatever thread calls it."""

    def __init__(self, c: MlflowClient, run_id: str):
        self.client, self.run_id = c, run_id

    def params(self, params: dict) -> None:
        """Log params. A stage rerun after a params.yaml change reuses its fold run (fold_run), and MLflow
        refuses to change a logged param: a value that differs from the one logged before is kept as the tag
        `param_changed.<key>` (with a warning) instead of failing the stage."""
        from mlflow.exceptions import MlflowException  # loaded already: self.client is a client

        changed = []
        for key, value in _flatten("", params).items():
            try:
                self.client.log_param(self.run_id, key, value)
            except MlflowException as e:
                if not _is_param_change(e):
                    raise
                self.tag(f"param_changed.{key}", str(value)[:5000])
                changed.append(key)
        if changed:
            warnings.warn(f"MLflow run {self.run_id} already had other values of {', '.join(changed)}; the new "
                          "ones are tags param_changed.*", stacklevel=2)

    def metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        ts = int(time.time() * 1000)
        for key, value in metrics.items():
            if value is not None:
                self.client.log_metric(self.run_id, key, float(value), timestamp=ts, step=step or 0)

    def artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        elif path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)


@contextmanager
def stage_run(name: str, parent_run_id: str | None = None, tags: dict[str, str] | None = None) -> Iterator[StageRun]:
    """Open a run named `name`, a child of `parent_run_id` (or of MWPGEN_PARENT_RUN_ID); close it FAILED on error."""
    c = client()
    parent = parent_run_id or os.environ.get(PARENT_ENV) or None
    all_tags = {"mwpgen.stage": name, **(tags or {})}
    if parent:
        all_tags["mlflow.parentRunId"] = parent
    run = c.create_run(experiment_id(c), run_name=name, tags=all_tags)
    status = "FAILED"
    try:
        yield StageRun(c, run.info.run_id)
        status = "FINISHED"
    finally:
        c.set_terminated(run.info.run_id, status)


def get_or_create_run(name: str, key: str, parent_run_id: str | None) -> str:
    """The run tagged `mwpgen.key = key` under `parent_run_id` (None: top level), created on first use.

    Stages run as separate processes (one per DVC stage), so the model x dataset and fold runs they share are
    found by tag rather than held in memory: train, generate and evaluate of one fold all log to one fold run.
    """
    c = client()
    exp = experiment_id(c)
    parent_filter = f"tags.mlflow.parentRunId = '{parent_run_id}'" if parent_run_id else None
    query = f"tags.`mwpgen.key` = '{key}'" + (f" and {parent_filter}" if parent_filter else "")
    for run in c.search_runs([exp], query, max_results=50, order_by=["attributes.start_time DESC"]):
        if parent_run_id or "mlflow.parentRunId" not in run.data.tags:
            return run.info.run_id
    tags = {"mwpgen.key": key}
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    return c.create_run(exp, run_name=name, tags=tags).info.run_id


@contextmanager
def fold_run(model: str, dataset: str, fold: int, stage: str) -> Iterator[StageRun]:
    """Log `stage` into the run pipeline -> `model x dataset` -> `fold k` (nesting by explicit parent ids)."""
    pipeline = os.environ.get(PARENT_ENV) or None
    group = get_or_create_run(f"{model} x {dataset}", f"{model}/{dataset}", pipeline)
    run_id = get_or_create_run(f"fold {fold}", f"{model}/{dataset}/fold{fold}", group)
    c = client()
    for rid in (group, run_id):
        c.update_run(rid, status="RUNNING")
    status = "FAILED"
    try:
        run = StageRun(c, run_id)
        yield run
        run.tag(f"mwpgen.stage.{stage}", "done")  # only once the stage has really finished
        status = "FINISHED"
    finally:
        for rid in (run_id, group):
            c.set_terminated(rid, status)
