"""The whole pipeline: DVC's stages under one parent MLflow run, so every stage run is its child.

`dvc repro`, DVC's own command, decides which stages are stale and runs them one after another; each is a Prefect flow
of its own (`python -m flows.<stage>`) that finds the parent run id in MWPGEN_PARENT_RUN_ID. Every stage reports to
one Prefect API, named by PREFECT_API_URL in the environment DVC passes on: the server PREFECT_API_URL already names,
else one this command starts on a free loopback port and stops at the end (orchestration/prefect_api.py), so no stage
starts a temporary server of its own. Each stage DVC runs is a task run of this flow run (`stage`, named by the
stage), its output that task run's log; a failure names the stage and its error in the run's final state. This is
also the flow that `prefect.yaml` deploys.

How it ends: a Ctrl-C (or SIGTERM) interrupts DVC and the running stage as a Ctrl-C at `dvc repro` would, waits for
them and exits 130 (143); killed outright, DVC and its stage get the same interruption from the kernel
(orchestration/dvc_command.py). Either way dvc.lock keeps what finished stages wrote, and nothing is staged for a
stage that did not finish. One pipeline per clone (orchestration/repro.py: `clone_lock`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor, wait
from typing import NoReturn

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.common import DEBUG_ENV, PROJECT_ROOT, NoTraceback, params_or_exit
from mwpgen.config.files import ParamsError
from mwpgen.config.profiles import apply_profile, resolve_profile
from mwpgen.config.schema import Params
from orchestration.fold_run import DvcCommandError, dvc
from orchestration.prefect_api import api_env, shared_api
from orchestration.repro import NOISE, CloneBusy, Repro, clone_lock, dvc_repro_args, stage_names, unknown_targets
from orchestration.status import remote_note, tracking_store_problem
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


def stage_logger() -> logging.Logger:
    """The logger a stage's output goes to: its one handler sends each line to the Prefect API as the stage task run's
    log (the terminal gets the raw lines from `echo`, not Prefect's formatted copy). Set up at each use: a logging
    configuration (Prefect's, at its start) may have reset it."""
    from prefect.logging.handlers import APILogHandler

    log = logging.getLogger("mwpgen.stage")
    log.propagate, log.disabled = False, False
    log.setLevel(logging.INFO)
    if not any(isinstance(h, APILogHandler) for h in log.handlers):
        log.addHandler(APILogHandler())
    return log


class StageFailed(RuntimeError):
    pass


@task(name="stage", task_run_name="{name}", cache_policy=NO_CACHE)
def stage(name: str, repro: Repro) -> None:
    """One stage `dvc repro` runs: its output, line by line, is this task run's log; it fails naming the stage's
    error if DVC ends failing on it."""
    log = stage_logger()
    for line in repro.stage_lines():
        log.info(line.rstrip("\n"))
    if repro.proc.poll() is None and repro.pending is None:  # its lines ended with DVC's output: DVC is ending
        repro.proc.wait()
    if repro.proc.returncode not in (None, 0) and repro.failed_stage in (None, name):
        raise StageFailed(f"stage {name} failed: {repro.cause()}")


_checked: set[tuple[str, ...]] = set()  # targets main() has checked already


def check_targets(targets: list[str], env: dict | None = None) -> None:
    """Refuse targets that name no stage (ValueError, one line each, with close matches)."""
    if not targets or tuple(targets) in _checked:
        return
    names = stage_names(PROJECT_ROOT, env)
    if names is not None and (bad := unknown_targets(PROJECT_ROOT, targets, names)):
        raise ValueError("; ".join(bad) + "; `dvc stage list` names them")
    _checked.add(tuple(targets))


@flow(name="pipeline")
def pipeline(targets: list[str] | None = None, force: bool = False, params_file: str = "params.yaml",
             push: bool = True, commit: bool = True, verbose: bool = False) -> None:
    log = get_run_logger()
    params = params_or_exit(str(PROJECT_ROOT / params_file))  # refuse bad params before any stage starts
    if push and not commit:
        raise ValueError("nothing to push without committing the outputs to the DVC cache")
    check_targets(targets or [])
    try:
        if note := remote_note(PROJECT_ROOT):
            log.warning(note)
    except Exception as e:  # noqa: BLE001 -- a note about the remote never stops a run
        log.info("could not check the DVC remote: %s", e)
    echo = (lambda line: print(line, end="", flush=True)) if verbose else (
        lambda line: None if NOISE.search(line) else print(line, end="", flush=True))
    with clone_lock(PROJECT_ROOT) as lock_fd, \
            stage_run("pipeline", tags={"dvc.targets": " ".join(targets or ["all"])}) as run:
        run.params(params.model_dump())
        env = stage_env(params, run.run_id)
        args = dvc_repro_args(targets, force, commit)
        log.info("dvc %s (parent MLflow run %s)", " ".join(args), run.run_id)
        start = time.time()
        repro = Repro(args, cwd=PROJECT_ROOT, env=env, lock_fd=lock_fd, echo=echo)
        try:
            while (name := repro.next_stage()) is not None:
                stage(name, repro)
            returncode = repro.wait()
        except StageFailed:
            repro.wait()
            raise
        except BaseException:  # Ctrl-C, SIGTERM made an exit: DVC and its stage stop first, as on a Ctrl-C
            repro.stop()
            raise
        finally:
            wall = time.time() - start
            # MLflow metric names may not contain "@" (DVC's matrix stage names do):
            # train_generator@gpt-... -> train_generator:gpt-...
            run.metrics({"wall_s": wall, **{f"stage_wall_s.{k.replace('@', ':')}": v
                                            for k, v in repro.seconds.items()}})
            for path in ("dvc.lock", "params.yaml"):
                if (PROJECT_ROOT / path).exists():  # a first run interrupted before any stage ended has no lock
                    run.artifact(PROJECT_ROOT / path)
        if returncode != 0:
            raise RuntimeError(f"dvc repro failed: {repro.cause()}")
        log.info("pipeline wall time %.1f s; stages run (wall s):\n%s", wall,
                 "\n".join(f"  {k:40s} {v:8.1f}" for k, v in repro.seconds.items()) or "  none: all up to date")
        if push:  # what this run produced, to the DVC remote (.dvc/config): `dvc pull` elsewhere restores it
            try:  # --with-deps: a target's upstream stages, which this run may have reproduced too
                dvc(["push", "--with-deps", *targets] if targets else ["push"], PROJECT_ROOT, env)
            except DvcCommandError as e:
                raise RuntimeError(f"{e} (the results are kept here; push again when the remote is reachable)") from e


def _prepare_while_the_server_starts() -> None:
    """The flow's first steps that need no Prefect API, done while its server starts (some 15 s on a fresh clone):
    MLflow's store and experiment created. The flow repeats it (then at no cost) and meets any error in it itself."""
    experiment_id(client())


USAGE_ERROR = 2  # bad arguments, profile, params or targets, a busy clone, an unwritable store: nothing ran
INTERRUPTED = 130  # a Ctrl-C, as a shell reports it (128 + SIGINT)


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
    cli.add_argument("--force", action="store_true",
                     help="rerun stages even if DVC finds them up to date: every stage without targets; with targets, "
                          "those stages only, not the stages upstream of them (`dvc repro --force --single-item`: "
                          "DVC's own --force would also rerun e.g. the evaluator for train_ours@...), which are "
                          "used as they are")
    cli.add_argument("--profile", help="apply profiles/<NAME>.yaml to params.yaml first (e.g. paper); "
                     "a path (with a / or ending in .yaml / .yml) is read as given")
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
    if args.profile:
        try:
            profile = resolve_profile(args.profile, PROJECT_ROOT / "profiles")
            changed = apply_profile(PROJECT_ROOT / "params.yaml", profile)
        except ParamsError as e:
            usage_error(str(e))
        print(f"profile {args.profile}: set " + (", ".join(changed) or "nothing (already applied)")
              + "; `python -m orchestration.undo` puts back params.yaml and every file the run changes in git")
    # Refuse bad params here, before Prefect starts and long before `dvc repro` (whose matrix would otherwise
    # meet e.g. an unknown dataset name first and fail with DVC's message instead of ours).
    try:
        params_or_exit(str(PROJECT_ROOT / "params.yaml"))
    except SystemExit as e:
        usage_error(str(e.code))
    if problem := tracking_store_problem(tracking_uri()):
        usage_error(problem)
    try:
        check_targets(args.targets)
    except ValueError as e:
        usage_error(str(e))
    if os.environ.get(DEBUG_ENV) != "1":  # a failure is said in one line, below; the stage's own output above it
        for name in ("prefect.flow_runs", "prefect.task_runs"):
            logging.getLogger(name).addFilter(NoTraceback())
    previous = signal.signal(signal.SIGTERM, _sigterm_as_exit)  # a SIGTERM stops the stages as Ctrl-C does, then exits
    try:
        with clone_lock(PROJECT_ROOT):
            check_tracking_server()
            with ThreadPoolExecutor(1) as pool:
                preparing = pool.submit(_prepare_while_the_server_starts)
                with shared_api() as api_url:
                    wait([preparing])
                    print(f"Prefect API for every stage: {api_url}", flush=True)
                    pipeline(targets=args.targets or None, force=args.force,
                             push=not (args.no_push or args.no_commit), commit=not args.no_commit,
                             verbose=args.verbose)
    except CloneBusy as e:
        usage_error(str(e))
    except RuntimeError as e:  # also PrefectServerError: no server could be started or reached
        sys.exit(f"error: {e}")
    except KeyboardInterrupt:
        print("interrupted: the running stage was stopped as by a Ctrl-C (a training keeps its checkpoint); "
              "run the same command again to go on", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
    finally:
        signal.signal(signal.SIGTERM, previous)  # main() is also called in-process (tests, the deployment flow)


def _sigterm_as_exit(signum, frame) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
