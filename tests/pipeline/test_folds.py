"""The pipeline on many machines, here: a Prefect server, a process work pool with two workers (each in its own
clone), a local-folder DVC remote, a tiny model and two (dataset, fold) runs at once. The fold run of fold 1 is
killed mid-run (its process and everything under it, as when its machine dies); Prefect submits it again and it
completes. Then a fresh clone restores the results with `dvc pull`, after which `dvc repro` has nothing to do."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.fold_scenario import FOLDS, clone, cluster
from tests.helpers.scratch_project import run_in, scratch_env

KILLED_FOLD = 1


def fold_flow_runs(api_url: str, fold: int) -> list:
    """The fold runs of `fold` (orchestration/fan_out.py tags them; the stage flows they start are not tagged). The
    server is named explicitly: Prefect's settings were read when an earlier test imported it, before this server
    existed."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.settings import PREFECT_API_URL, temporary_settings

    tags = FlowRunFilterTags(all_=["dataset:arithmetic", f"fold:{fold}"])
    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=tags))


def kill_fold_run_when_training(api_url: str, fold: int, clones: list[Path], done: threading.Event,
                                log: list) -> None:
    """Once fold `fold`'s run has trained its evaluator (in whichever clone), SIGKILL its process tree. A failure
    here is kept in `log` for the test to show (a thread's exception would otherwise vanish)."""
    try:
        _kill_when_training(api_url, fold, clones, done, log)
    except Exception as e:
        log.append(("error", repr(e)))


def _kill_when_training(api_url: str, fold: int, clones: list[Path], done: threading.Event, log: list) -> None:
    deadline = time.time() + 600
    while time.time() < deadline and not done.is_set():
        running = [r for r in fold_flow_runs(api_url, fold) if r.state_type and r.state_type.value == "RUNNING"]
        evaluator_done = any((c / "models" / "evaluator" / "arithmetic" / f"fold{fold}").exists() for c in clones)
        if running and evaluator_done:
            run_id = str(running[0].id)
            top = _top_process_of(run_id)
            if top is not None:
                # The whole tree at once, top first, as when the machine dies. Killing only a stage below it would
                # let the flow run see its child fail and end FAILED rather than CRASHED.
                victims = [top, *top.children(recursive=True)]
                for p in victims:
                    try:
                        p.send_signal(signal.SIGKILL)
                    except psutil.NoSuchProcess:
                        pass
                log.append((run_id, len(victims)))
                return
        time.sleep(0.5)


def _top_process_of(run_id: str) -> psutil.Process | None:
    """The flow run's own process: the one carrying its id whose parent does not (its stages inherit the id, and
    process ids are not ordered by age once they wrap)."""
    def carries(proc: psutil.Process | None) -> bool:
        try:
            return proc is not None and proc.environ().get("PREFECT__FLOW_RUN_ID") == run_id
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    for proc in psutil.process_iter():
        try:
            if carries(proc) and not carries(proc.parent()):
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.fixture(scope="module")
def fanned_out(tmp_path_factory, prefect_api):
    with cluster(tmp_path_factory.mktemp("folds"), n_workers=2) as c:
        killed: list = []
        done = threading.Event()
        killer = threading.Thread(target=kill_fold_run_when_training, args=(prefect_api, KILLED_FOLD, c.workers, done,
                                                                           killed))
        killer.start()
        try:
            proc = c.submit(concurrency=2)
        finally:
            done.set()
            killer.join()
        yield {"base": c.base, "parent": c.parent, "proc": proc, "killed": killed, "worker_logs": c.worker_logs(),
               "api": prefect_api}


@pytest.mark.slow
def test_both_folds_reach_the_report(fanned_out):
    proc = fanned_out["proc"]
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n{fanned_out['worker_logs']}"
    # The submitting clone ran the report and nothing else: every fold came back whole (remote + artifact).
    assert re.findall(r"Running stage '([^']+)'", proc.stdout) == ["report"], proc.stdout[-3000:]
    parent = fanned_out["parent"]
    report = json.loads((parent / "metrics" / "report.json").read_text())
    # Every fold's scores came back to the submitting clone through the remote, and the report averages them all.
    folds = [json.loads((parent / "results" / "scores" / "ours" / "arithmetic" / f"fold{k}.json").read_text())
             for k in FOLDS]
    for metric in ("meteor", "rouge_l"):
        assert report["ours"]["arithmetic"][metric] == pytest.approx(sum(f[metric] for f in folds) / len(folds),
                                                                     abs=1e-4)


@pytest.mark.slow
def test_the_killed_fold_was_retried_and_completed(fanned_out):
    killed = fanned_out["killed"]
    assert killed and killed[0][0] != "error", (
        killed or "the fold run was never seen running with its evaluator trained"
    )
    runs = fold_flow_runs(fanned_out["api"], KILLED_FOLD)
    states = sorted(r.state_type.value for r in runs)
    assert "CRASHED" in states and "COMPLETED" in states, states
    killed_id = fanned_out["killed"][0][0]
    assert next(r for r in runs if str(r.id) == killed_id).state_type.value == "CRASHED"
    # the other fold ran once
    assert [r.state_type.value for r in fold_flow_runs(fanned_out["api"], 0)] == ["COMPLETED"]


@pytest.mark.slow
def test_a_fresh_clone_pulls_the_results_and_has_nothing_to_reproduce(fanned_out, tmp_path):
    parent = fanned_out["parent"]
    # What the run's owner commits: dvc.lock, the outputs DVC does not cache (metrics, reports, scores) and the
    # .gitignore files DVC wrote for the cached ones.
    subprocess.run(["git", "add", "-A"], cwd=parent, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results"], cwd=parent,
                   check=True)
    committed = subprocess.run(["git", "ls-files", "results/generations", "results/predictions", "models"], cwd=parent,
                               capture_output=True, text=True, check=True).stdout.split()
    assert committed and all(Path(f).name == ".gitignore" for f in committed), committed  # outputs stay in DVC
    fresh = clone(parent, tmp_path / "fresh")
    env = scratch_env(fresh)
    run_in(fresh, env, [sys.executable, "-m", "dvc", "pull"])
    for fold in FOLDS:
        assert (fresh / "results" / "generations" / "ours" / "arithmetic" / f"fold{fold}.csv").exists()
        assert (fresh / "models" / "ours" / "arithmetic" / f"fold{fold}").is_dir()
        assert (fresh / "results" / "predictions" / "ours" / "arithmetic" / f"fold{fold}.jsonl").exists()
    status = run_in(fresh, env, [sys.executable, "-m", "dvc", "status"]).stdout
    assert "up to date" in status, status


def test_a_fold_that_keeps_failing_is_named_and_the_others_are_kept(tmp_path, monkeypatch, prefect_api):
    """orchestration.fan_out with a fold that fails after its retries: the error names it, the other fold's lock
    entries and uncached outputs are merged and pulled here, and no report runs (its inputs are incomplete). The flow
    runs in this process, against the session's server (`prefect_api`), not a temporary one of its own."""
    import yaml
    from prefect import task

    import orchestration.fan_out as folds

    params = yaml.safe_load((Path(folds.PROJECT_ROOT) / "params.yaml").read_text())
    params["experiment"]["folds"] = [0, 1]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    @task
    def fake_run_fold(deployment, dataset, fold, parent_run_id, params_sha256):
        if fold == 1:
            raise folds.FoldError("arithmetic fold 1: flow run x ended CRASHED: machine lost")
        return ({"keywords@arithmetic-0": {"cmd": "python -m flows.keywords --dataset arithmetic --fold 0"}},
                {"metrics/keywords/arithmetic/fold0.json": '{"n": 1}\n'})

    dvc_calls = []
    monkeypatch.setattr(folds, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(folds, "run_fold", fake_run_fold)
    monkeypatch.setattr(folds, "dvc", lambda args, cwd, env=None: dvc_calls.append(args[0]) or "")
    monkeypatch.setattr(folds, "ignore_pulled_outputs", lambda stages: None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(folds.FoldError, match=r"folds failed: arithmetic-1 \(FoldError: .*machine lost\).*"
                                              r"arithmetic-0 are merged"):
        folds.pipeline_folds(concurrency=2)
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]
    assert list(lock) == ["keywords@arithmetic-0"]
    assert (tmp_path / "metrics" / "keywords" / "arithmetic" / "fold0.json").read_text() == '{"n": 1}\n'
    assert dvc_calls == ["pull"]  # pulled what came back; no report
