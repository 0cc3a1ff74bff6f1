"""MLflow logging with explicit run ids.

MLflow's active run is per thread and Prefect runs tasks in worker threads, so nothing here uses
`mlflow.start_run`: every call names its run id through an `MlflowClient`.

The store defaults to a sqlite file at an absolute path inside the project (a relative URI would be lost under
`dvc exp run --temp`, which runs in a copy of the project); artifacts go to `mlartifacts/` beside it.
A pipeline run exports its run id as MWPGEN_PARENT_RUN_ID so the stage runs that `dvc repro` starts
become its children; stages of a plain `dvc repro` or `dvc exp run` (no such variable) share a parent made by the
first of them, found by the id of that DVC command (tracking/provenance.py `repro_id`).

What a run says about itself (docs/tracking.md): its name (`pipeline · smoke · train_ours@arithmetic-0`,
`ours · arithmetic · fold 1`), its tags (the git commit and a dirty flag, the profile, the DVC experiment name), and
metric names that keep quality apart from cost: timings go under `time/` (MLflow's charts group metrics into a
section per prefix), and training curves are `train_loss` / `val_loss` by step for every trainer.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from mwpgen.paths import PROJECT_ROOT
from tracking.provenance import repro_id, run_tags

if TYPE_CHECKING:  # annotations only: any mlflow import runs all of mlflow/__init__ (~1 s), left to client()
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

EXPERIMENT = os.environ.get("MWPGEN_EXPERIMENT", "mwpgen")
PARENT_ENV = "MWPGEN_PARENT_RUN_ID"
SEP = " · "  # between the parts of a run name
TIME_PREFIX = "time/"
CURVE_METRICS = ("train_loss", "val_loss")  # per step, the same names for every trainer


def pipeline_run_name(targets: str, profile: str, kind: str = "pipeline") -> str:
    """`pipeline · default · all`, `pipeline · smoke · train_ours@arithmetic-0` (targets: space-separated)."""
    return SEP.join([kind, profile, ", ".join(targets.split()) or "all"])


def fold_run_name(model: str, dataset: str, fold: int | None = None) -> str:
    """`ours · arithmetic · fold 1`; without a fold, the model x dataset group `ours · arithmetic`."""
    return SEP.join([model, dataset] + ([] if fold is None else [f"fold {fold}"]))


def is_timing(key: str) -> bool:
    """A cost, not a result: seconds (`wall_s`, `phase1_step_s`, `timings_s.parse`), rates (`tokens_per_s`,
    `phase1_min_per_epoch`) and anything under a `timing` key."""
    parts = key.split(".")
    return any(p == "timing" or p.endswith(("_s", "_per_epoch")) for p in parts)


def metric_key(key: str) -> str:
    """The MLflow name of a metric: a timing under `time/` (`wall_s` -> `time/wall_s`, `timing.parse_s` ->
    `time/parse_s`, `stage_cpu_s.report` -> `time/stage_cpu_s.report`); any other name as it is."""
    if key.startswith(TIME_PREFIX) or not is_timing(key):
        return key
    return TIME_PREFIX + key.removeprefix("timing.")


def curve_rows(curve_csv: str) -> list[dict[str, float | None]]:
    """The rows of a `step,train_loss,val_loss` curve (an older `loss` column read as train_loss); empty cells None."""
    lines = [line.split(",") for line in curve_csv.strip().splitlines()]
    header = ["train_loss" if h == "loss" else h for h in lines[0]] if lines else []
    return [{h: (float(c) if c != "" else None) for h, c in zip(header, cells)} for cells in lines[1:]]


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
        """Log metrics; a timing (`is_timing`) is logged as `time/<name>`, apart from the quality metrics."""
        ts = int(time.time() * 1000)
        for key, value in metrics.items():
            if value is not None:
                self.client.log_metric(self.run_id, metric_key(key), float(value), timestamp=ts, step=step or 0)

    def curve(self, rows: list[dict[str, float | None]]) -> int:
        """Log a training curve (rows with `step` and some of CURVE_METRICS) as step-indexed metrics, leaving each
        step already logged under that name (live, during training) as it is; returns how many values it logged."""
        from mlflow.entities import Metric

        ts, new = int(time.time() * 1000), []
        for name in CURVE_METRICS:
            logged = {m.step for m in self.client.get_metric_history(self.run_id, name)}
            new += [Metric(name, float(r[name]), ts, int(r["step"])) for r in rows
                    if r.get(name) is not None and int(r["step"]) not in logged]
        for start in range(0, len(new), 1000):  # MLflow's log_batch takes at most 1000 metrics
            self.client.log_batch(self.run_id, metrics=new[start:start + 1000])
        return len(new)

    def artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        elif path.exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)


def find_parent_run(explicit: str | None = None) -> str | None:
    """The run a stage's runs go under: `explicit`, else MWPGEN_PARENT_RUN_ID (orchestration.pipeline sets it), else
    the run of the `dvc repro` / `dvc exp run` running this stage (`repro_run`); None for a stage run by hand."""
    if explicit or os.environ.get(PARENT_ENV):
        return explicit or os.environ[PARENT_ENV]
    return repro_run()


def repro_run() -> str | None:
    """The parent run of a plain `dvc repro` / `dvc exp run`, one per such command (provenance.repro_id): the first
    stage creates it, tagged `mwpgen.key = repro/<id>`, and the next stages find it by that tag. Its name says the
    command and profile (`dvc exp run · default · exp-name`); it is FINISHED when its last stage finishes."""
    rid = repro_id()
    if rid is None:
        return None
    tags = run_tags()
    experiment = tags.get("mwpgen.dvc_experiment")
    kind = "dvc exp run" if experiment or os.environ.get("DVC_EXP_BASELINE_REV") else "dvc repro"
    name = SEP.join([kind, tags["mwpgen.profile"]] + ([experiment] if experiment else []))
    return get_or_create_run(name, f"repro/{rid}", None, {"mwpgen.stage": "pipeline", "mwpgen.repro": rid})


def _run_name(stage: str, tags: dict[str, str]) -> str:
    if stage == "pipeline":  # orchestration's pipeline run: say which profile and targets
        return pipeline_run_name(tags.get("dvc.targets", "all"), tags.get("mwpgen.profile", "default"))
    return stage


@contextmanager
def stage_run(name: str, parent_run_id: str | None = None, tags: dict[str, str] | None = None) -> Iterator[StageRun]:
    """Open a run for stage `name` (a `pipeline` run is named by profile and targets, `pipeline_run_name`), a child
    of `parent_run_id` (else of find_parent_run()), tagged with run_tags(); close it FAILED on error."""
    c = client()
    parent = parent_run_id or (None if name == "pipeline" else find_parent_run())
    all_tags = {**run_tags(), "mwpgen.stage": name, **(tags or {})}
    if parent:
        all_tags["mlflow.parentRunId"] = parent
    run = c.create_run(experiment_id(c), run_name=_run_name(name, all_tags), tags=all_tags)
    repro = (parent,) if parent and not (parent_run_id or os.environ.get(PARENT_ENV)) else ()
    for rid in repro:  # a plain repro's run: RUNNING while a stage runs, then its latest stage's state
        c.update_run(rid, status="RUNNING")
    status = "FAILED"
    try:
        yield StageRun(c, run.info.run_id)
        status = "FINISHED"
    finally:
        for rid in (run.info.run_id, *repro):
            c.set_terminated(rid, status)


def get_or_create_run(name: str, key: str, parent_run_id: str | None, tags: dict[str, str] | None = None) -> str:
    """The run tagged `mwpgen.key = key` under `parent_run_id` (None: top level), created on first use (named
    `name`, with run_tags() and `tags`).

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
    all_tags = {**run_tags(), **(tags or {}), "mwpgen.key": key}
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    return c.create_run(exp, run_name=name, tags=all_tags).info.run_id


@contextmanager
def fold_run(model: str, dataset: str, fold: int, stage: str) -> Iterator[StageRun]:
    """Log `stage` into the run pipeline -> `model · dataset` -> `model · dataset · fold k` (nesting by explicit
    parent ids); the pipeline is find_parent_run()'s (orchestration's, a plain repro's, or none)."""
    pipeline = find_parent_run()
    about = {"mwpgen.model": model, "mwpgen.dataset": dataset}
    group = get_or_create_run(fold_run_name(model, dataset), f"{model}/{dataset}", pipeline, about)
    run_id = get_or_create_run(fold_run_name(model, dataset, fold), f"{model}/{dataset}/fold{fold}", group,
                               {**about, "mwpgen.fold": str(fold)})
    c = client()
    owned = (run_id, group) + ((pipeline,) if pipeline and not os.environ.get(PARENT_ENV) else ())
    for rid in owned:
        c.update_run(rid, status="RUNNING")
    status = "FAILED"
    try:
        run = StageRun(c, run_id)
        yield run
        run.tag(f"mwpgen.stage.{stage}", "done")  # only once the stage has really finished
        status = "FINISHED"
    finally:
        for rid in owned:
            c.set_terminated(rid, status)
