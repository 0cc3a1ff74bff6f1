"""The pipeline fanned out over Prefect workers: one `fold` flow run per (dataset, fold), then the report here.

Every (dataset, fold) of params.yaml's experiment is submitted to the `fold` deployment (orchestration/fold_run.py), at
most `concurrency` at a time; each runs on whichever worker of the work pool is free, in that worker's own clone, and
pushes its outputs to the DVC remote. A fold run that fails or crashes (its machine lost, its process killed) is
submitted again by Prefect (`retries`); it resumes from what the remote and that worker's clone already hold. As each
comes back, its uncached outputs (metrics, scores, curves) are written here and its dvc.lock entries merged into this
clone's dvc.lock (both read from the server, orchestration/fold_run.py); then the cached outputs are pulled from the
remote and `report` runs here -- the only stage that does. A fold that still fails is named in the error, and the other
folds' entries stay merged and their outputs pulled. One MLflow run, `pipeline`, is the parent of every stage run.

    python -m orchestration.fan_out                       # a Prefect server, the `fold` deployment and workers running
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml
from prefect import flow, get_run_logger, task
from prefect.artifacts import Artifact
from prefect.cache_policies import NO_CACHE
from prefect.deployments import run_deployment
from prefect.futures import as_completed

from flows.common import PROJECT_ROOT, params_or_exit
from orchestration.fold_run import (
    DvcCommandError,
    FoldError,
    artifact_key,
    dvc,
    outputs_of,
    params_digest,
    read_fold_markdown,
)
from orchestration.prefect_api import API_ENV, api_env, is_serving
from tracking.runs import PARENT_ENV, stage_run

FOLD_DEPLOYMENT = "fold/mwpgen-fold"


@task(cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def run_fold(deployment: str, dataset: str, fold: int, parent_run_id: str, params_sha256: str
             ) -> tuple[dict, dict[str, str]]:
    """One fold run on a worker, waited for; its dvc.lock entries and uncached outputs. Raises (and so is retried)
    unless it completed."""
    flow_run = run_deployment(deployment, parameters={"dataset": dataset, "fold": fold,
                                                      "parent_run_id": parent_run_id,
                                                      "params_sha256": params_sha256},
                              tags=[f"dataset:{dataset}", f"fold:{fold}"], poll_interval=2)
    state = flow_run.state
    if state is None or not state.is_completed():
        raise FoldError(f"{dataset} fold {fold}: flow run {flow_run.name} ended "
                        f"{state.type.value if state else 'without a state'}: {state.message if state else ''}")
    artifact = Artifact.get(artifact_key(dataset, fold))
    if artifact is None or artifact.flow_run_id != flow_run.id:
        raise FoldError(f"{dataset} fold {fold}: flow run {flow_run.name} completed without its dvc.lock artifact")
    return read_fold_markdown(artifact.data)


def write_outputs(files: dict[str, str]) -> None:
    """A fold's uncached outputs (metrics, scores, curves) into this clone, where that fold's stages put them."""
    root = PROJECT_ROOT.resolve()
    for rel, text in files.items():
        path = (root / rel).resolve()
        if not path.is_relative_to(root):
            raise FoldError(f"a fold run sent an output outside the project: {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def merge_lock(entries: dict) -> None:
    """This clone's dvc.lock with a fold's stage entries (shared data stages only where missing here)."""
    path = PROJECT_ROOT / "dvc.lock"
    lock = yaml.safe_load(path.read_text()) if path.exists() else {"schema": "2.0", "stages": {}}
    for name, entry in entries.items():
        if "@" in name or name not in lock["stages"]:
            lock["stages"][name] = entry
    path.write_text(yaml.safe_dump(lock, sort_keys=False))


def ignore_pulled_outputs(stages: set[str]) -> None:
    """.gitignore entries for the cached outputs of `stages`: DVC writes them when a stage saves its outputs, not
    when `dvc pull` checks them out, and without them committing this clone's result would put them in git."""
    from dvc.repo import Repo

    with Repo(str(PROJECT_ROOT)) as repo:
        for out in outputs_of(repo, stages):
            if out.use_cache:
                repo.scm_context.ignore(out.fs_path)


@flow(name="pipeline-folds")
def pipeline_folds(deployment: str = FOLD_DEPLOYMENT, concurrency: int = 2) -> dict:
    log = get_run_logger()
    params = params_or_exit(str(PROJECT_ROOT / "params.yaml"))
    folds = [(d, f) for d in params.experiment.datasets for f in params.experiment.folds]
    digest = params_digest(PROJECT_ROOT)
    with stage_run("pipeline", tags={"dvc.targets": "folds"}) as run:
        run.params(params.model_dump())
        pending, running, failed, done, merged = list(folds), {}, {}, [], set()
        while pending or running:
            while pending and len(running) < concurrency:  # bounded: the others wait their turn here
                dataset, fold = pending.pop(0)
                future = run_fold.submit(deployment, dataset, fold, run.run_id, digest)
                running[future] = (dataset, fold)
            future = next(as_completed(list(running)))
            dataset, fold = running.pop(future)
            try:
                entries, files = future.result()
            except Exception as e:  # whatever ended the fold, it is reported by name below
                failed[f"{dataset}-{fold}"] = f"{type(e).__name__}: {e}"
                log.error("%s fold %d failed after retries: %s", dataset, fold, e)
                continue
            write_outputs(files)
            merge_lock(entries)
            merged.update(entries)
            done.append(f"{dataset}-{fold}")
            log.info("%s fold %d: done", dataset, fold)
        dvc(["pull", "--allow-missing"], PROJECT_ROOT)
        ignore_pulled_outputs(merged)
        if failed:
            raise FoldError(f"folds failed: {', '.join(f'{k} ({v})' for k, v in failed.items())}; the results of "
                            f"{', '.join(done) or 'no fold'} are merged into dvc.lock and pulled")
        dvc(["repro", "report"], PROJECT_ROOT, {**os.environ, **api_env(), PARENT_ENV: run.run_id})
        dvc(["push"], PROJECT_ROOT)
    return {"folds": done}


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--deployment", default=FOLD_DEPLOYMENT, help="the fold deployment (prefect.yaml)")
    cli.add_argument("--concurrency", type=int, default=2, help="fold runs at once (at most)")
    args = cli.parse_args()
    api_url = api_env().get(API_ENV)
    if not api_url or not is_serving(api_url, timeout_s=10):
        sys.exit(f"error: {API_ENV} must name the Prefect server the fold workers poll "
                 f"({'it does not answer: ' + api_url if api_url else 'it is not set'})")
    try:
        pipeline_folds(args.deployment, args.concurrency)
    except (FoldError, DvcCommandError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
