"""The whole pipeline: DVC's stages under one parent MLflow run, so every stage run is its child.

DVC decides which stages are stale; each stage it runs is a Prefect flow of its own (`python -m flows.<stage>`)
that finds the parent run id in MWPGEN_PARENT_RUN_ID. Stages that do not depend on each other may run side by side
(`--jobs`; a smoke run two at a time), each reproduced by a `dvc repro` of its own (orchestration/parallel_repro.py).
Every stage reports to one Prefect API, named by PREFECT_API_URL in the environment DVC passes on: the server
PREFECT_API_URL already names, else one this command starts on a free loopback port and stops at the end
(orchestration/prefect_api.py), so no stage starts a temporary server of its own. This is also the flow that
`prefect.yaml` deploys.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor, wait
from typing import NoReturn

from prefect import flow, get_run_logger

from flows.common import DEBUG_ENV, PROJECT_ROOT, NoTraceback, params_or_exit
from mwpgen.config.files import ParamsError
from mwpgen.config.profiles import apply_profile, resolve_profile
from mwpgen.config.schema import Params
from orchestration import parallel_repro
from orchestration.fold_run import DvcCommandError, dvc
from orchestration.prefect_api import api_env, shared_api
from orchestration.stage_reaper import describe, leftover_stages, wait_for_leftovers
from tracking.runs import PARENT_ENV, client, experiment_id, stage_run, tracking_uri


def threads_env(params: Params) -> dict[str, str]:
    """What a smoke run changes in how its stages' threads wait."""
    if not params.experiment.smoke:
        return {}
    # Short stages sharing 2 cores with the METEOR JVM, DVC and the Prefect server: torch's OpenMP threads sleep
    # instead of spinning while they wait (a parse beside the JVM's start 3.3 s against 7.8 s; but a long
    # training's step 6 % slower, so not for real runs: benchmarks/bench_omp_wait.py). A value already set stands.
    return {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def stage_env(params: Params, parent_run_id: str) -> dict[str, str]:
    """The environment `dvc repro` passes on to every stage: this run's Prefect API and MLflow parent run."""
    return {**os.environ, **api_env(), PARENT_ENV: parent_run_id, **threads_env(params)}


SMOKE_JOBS = 2  # a smoke run's stages side by side on two cores: studies/stage_overhead


def stage_jobs(params: Params, jobs: int | None) -> int:
    """Stages run at once: `jobs` when given; else two in a smoke run, whose short stages keep 1.2 of two cores busy
    one at a time, and one otherwise: a training takes both cores of a 2-core machine."""
    return jobs or (SMOKE_JOBS if params.experiment.smoke else 1)


@flow(name="pipeline")
def pipeline(targets: list[str] | None = None, force: bool = False, params_file: str = "params.yaml",
             push: bool = True, commit: bool = True, jobs: int | None = None,
             verbose: bool = False) -> None:
    log = get_run_logger()
    params = params_or_exit(str(PROJECT_ROOT / params_file))  # refuse bad params before any stage starts
    if push and not commit:
        raise ValueError("nothing to push without committing the outputs to the DVC cache")
    jobs = stage_jobs(params, jobs)
    with stage_run("pipeline", tags={"dvc.targets": " ".join(targets or ["all"])}) as run:
        run.params({**params.model_dump(), "jobs": jobs})
        env = stage_env(params, run.run_id)
        start = time.time()
        if leftovers := leftover_stages(PROJECT_ROOT):
            log.warning("waiting for the stages of an earlier run to stop: %s", describe(leftovers))
            if leftovers := wait_for_leftovers(PROJECT_ROOT):
                raise RuntimeError(f"stages of an earlier run are still running: {describe(leftovers)}")
        planned = parallel_repro.plan(PROJECT_ROOT, targets or [], force)
        log.info("%d stages to reproduce, %d at a time (parent MLflow run %s); %d up to date", len(planned.stages),
                 jobs, run.run_id, planned.up_to_date)
        outcome = parallel_repro.run(planned, parallel_repro.dvc_repro(force, commit), cwd=PROJECT_ROOT,
                                     env=env, jobs=jobs, verbose=verbose)
        wall = time.time() - start
        if outcome.unchanged:  # planned because something upstream might change it, then found up to date by DVC
            log.info("%d stages up to date after all: %s", len(outcome.unchanged), ", ".join(outcome.unchanged))
        log.info("pipeline wall time %.1f s; stage wall and CPU times (s; CPU: DVC's and the stage's):\n%s", wall,
                 "\n".join(f"  {k:40s} {v:8.1f} {outcome.cpu_seconds[k]:8.1f}" for k, v in outcome.seconds.items()))
        # MLflow metric names may not contain "@" (DVC's matrix stage names do): train_generator@gpt-arithmetic-0 ->
        # train_generator:gpt-...
        run.metrics({"wall_s": wall, **{f"stage_{what}.{k.replace('@', ':')}": v
                                        for what, times in (("wall_s", outcome.seconds), ("cpu_s", outcome.cpu_seconds))
                                        for k, v in times.items()}})
        for path in ("dvc.lock", "params.yaml"):
            run.artifact(PROJECT_ROOT / path)
        if not outcome.ok:
            raise RuntimeError(f"failed: {', '.join(outcome.failed)}; see their output above"
                               + (f" (not started: {', '.join(outcome.not_started)})" if outcome.not_started else ""))
        if push:  # what this run produced, to the DVC remote (.dvc/config): `dvc pull` elsewhere restores it
            try:  # --with-deps: a target's upstream stages, which this run may have reproduced too
                dvc(["push", "--with-deps", *targets] if targets else ["push"], PROJECT_ROOT, env)
            except DvcCommandError as e:
                raise RuntimeError(f"{e} (the results are kept here; push again when the remote is reachable)") from e


def _prepare_while_the_server_starts() -> None:
    """The flow's first steps that need no Prefect API, done while its server starts (some 15 s on a fresh clone):
    MLflow's store and experiment created, DVC's planner imported. The flow repeats both (then at no cost) and
    meets any error in them itself."""
    import dvc.repo.reproduce  # noqa: F401 — imported for its cost alone, paid while the server starts

    experiment_id(client())


USAGE_ERROR = 2  # bad arguments, profile or params: nothing ran


def usage_error(message: str) -> NoReturn:
    print(message if message.startswith("error: ") else f"error: {message}", file=sys.stderr)
    sys.exit(USAGE_ERROR)


def check_tracking_server(timeout_s: float = 5.0) -> None:
    """An MLflow tracking server that does not answer is named now, not after MLflow's retries (minutes)."""
    uri = tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s):
            pass
    except OSError as e:
        raise RuntimeError(f"the MLflow tracking server {uri} (MLFLOW_TRACKING_URI) does not answer: "
                           f"{getattr(e, 'reason', e)}") from None


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__)
    cli.add_argument("targets", nargs="*", help="DVC stages to reproduce (default: all)")
    cli.add_argument("--force", action="store_true", help="rerun stages even if DVC finds them up to date")
    cli.add_argument("--profile", help="apply profiles/<NAME>.yaml to params.yaml first (e.g. paper); "
                     "a path (with a / or ending in .yaml / .yml) is read as given")
    cli.add_argument("--jobs", type=int, metavar="N",
                     help=f"stages to run at once when they do not depend on each other (default: {SMOKE_JOBS} in a "
                          "smoke run, else 1: a training takes both cores of a 2-core machine)")
    cli.add_argument("--verbose", action="store_true",
                     help="echo every line the stages print (Prefect's run states, DVC's hints, progress bars)")
    cli.add_argument("--no-push", action="store_true", help="do not `dvc push` the results to the DVC remote")
    cli.add_argument(
        "--no-commit",
        action="store_true",
        help="do not copy the outputs into the DVC cache (`dvc repro --no-commit`; implies --no-push): for "
        "a first look whose models are thrown away; `dvc commit` caches them later",
    )
    args = cli.parse_args()
    if args.jobs is not None and args.jobs < 1:
        cli.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.profile:
        try:
            profile = resolve_profile(args.profile, PROJECT_ROOT / "profiles")
            changed = apply_profile(PROJECT_ROOT / "params.yaml", profile)
        except ParamsError as e:
            usage_error(str(e))
        print(f"profile {args.profile}: set " + (", ".join(changed) or "nothing (already applied)"))
    # Refuse bad params here, before Prefect starts and long before `dvc repro` (whose matrix would otherwise
    # meet e.g. an unknown dataset name first and fail with DVC's message instead of ours).
    try:
        params_or_exit(str(PROJECT_ROOT / "params.yaml"))
    except SystemExit as e:
        usage_error(str(e.code))
    if os.environ.get(DEBUG_ENV) != "1":  # a failure is said in one line, below; the stage's own output above it
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).addFilter(NoTraceback())
    try:
        check_tracking_server()
        with ThreadPoolExecutor(1) as pool:
            preparing = pool.submit(_prepare_while_the_server_starts)
            with shared_api() as api_url:
                wait([preparing])
                print(f"Prefect API for every stage: {api_url}", flush=True)
                pipeline(targets=args.targets or None, force=args.force, push=not (args.no_push or args.no_commit),
                         commit=not args.no_commit, jobs=args.jobs, verbose=args.verbose)
    except RuntimeError as e:  # also PrefectServerError: no server could be started or reached
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        sys.exit("interrupted: the running stages were stopped as by a Ctrl-C (a training keeps its checkpoint); "
                 "run the same command again to go on")


if __name__ == "__main__":
    main()
