"""The pipeline on many machines, here: a Prefect server, a process work pool with two workers (each in its own
clone), a local-folder DVC remote, a tiny model and two (dataset, fold) runs at once. The fold run of fold 1 is
killed mid-run (its process and everything under it, as when its machine dies); Prefect submits it again and it
completes. Then a fresh clone restores the results with `dvc pull`, after which `dvc repro` has nothing to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import copy_project, run_in, scratch_env
from test_pipeline_models import synthetic_records

from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from tiny_model import tiny_model_dir

FOLDS = [0, 1]
KILLED_FOLD = 1
# The data stages are the same on every machine; here the data is synthetic and committed, so they are dropped.
DATA_STAGES = ("download", "translate", "preprocess", "split", "register")


def base_project(root: Path, remote: Path) -> Path:
    base = root / "base"
    base.mkdir()
    copy_project(base)
    records = synthetic_records(50)
    write_jsonl(base / "data" / "processed" / "arithmetic.jsonl", records)
    write_json(base / "data" / "splits" / "arithmetic.json",
               {"dataset": "arithmetic", "n_folds": 5, "seed": 1, "method": "seeded", "folds": seeded_folds(records, 5, 1)})
    corpus = [r["text"] + " " + r["equation"] for r in records] + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE]
    tiny_model_dir(base / "tiny-model", corpus)
    stages = yaml.safe_load((base / "dvc.yaml").read_text())
    for name in DATA_STAGES:
        del stages["stages"][name]
    (base / "dvc.yaml").write_text(yaml.safe_dump(stages, sort_keys=False))
    params = yaml.safe_load((base / "params.yaml").read_text())
    params["experiment"].update(datasets=["arithmetic"], folds=FOLDS, validation_size=4)
    # The fewest stages the report needs: GPT-pre (its reference row) and ours (Table 5).
    params["models"] = {"causal_lm": ["gpt_pre"], "seq2seq": [], "generate": ["gpt_pre", "ours"]}
    params["train"].update(model="tiny-model", log_every=5)
    for kind in ("generator", "evaluator"):
        params["train"][kind].update(max_steps=30, batch_size=8, lr=3e-3, save_every=5)
    params["generate"].update(max_new_tokens=20, batch_size=8)
    (base / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = scratch_env(base)
    run_in(base, env, [sys.executable, "-m", "dvc", "remote", "modify", "storage", "url", str(remote)])
    run_in(base, env, ["git", "add", "-A", "-f", "data", "tiny-model", "dvc.yaml", "params.yaml", ".dvc/config"])
    run_in(base, env, ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fold test"])
    return base


def clone(base: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(base), str(dest)], check=True)
    return dest


def fold_flow_runs(fold: int) -> list:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        # Fold runs come from the deployment; the stage flows they start (same parameters) do not.
        return [r for r in client.read_flow_runs(limit=200) if r.deployment_id is not None
                and r.parameters.get("fold") == fold and r.parameters.get("dataset") == "arithmetic"]


def kill_fold_run_when_training(fold: int, clones: list[Path], done: threading.Event, log: list) -> None:
    """Once fold `fold`'s run has trained its evaluator (in whichever clone), SIGKILL its process tree."""
    deadline = time.time() + 600
    while time.time() < deadline and not done.is_set():
        running = [r for r in fold_flow_runs(fold) if r.state_type and r.state_type.value == "RUNNING"]
        evaluator_done = any((c / "models" / "mwp2eq" / "arithmetic" / f"fold{fold}").exists() for c in clones)
        if running and evaluator_done:
            run_id = str(running[0].id)
            for proc in psutil.process_iter():
                try:
                    if proc.environ().get("PREFECT__FLOW_RUN_ID") == run_id:
                        victims = [proc, *proc.children(recursive=True)]
                        for p in victims:
                            p.send_signal(signal.SIGKILL)
                        log.append((run_id, len(victims)))
                        return
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
        time.sleep(0.5)


@pytest.fixture(scope="module")
def fanned_out(tmp_path_factory, prefect_api):
    root = tmp_path_factory.mktemp("folds")
    remote = root / "remote"
    base = base_project(root, remote)
    workers = [clone(base, root / f"worker{i}") for i in (1, 2)]
    parent = clone(base, root / "parent")
    env = scratch_env(parent, MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}", PREFECT_LOGGING_LEVEL="INFO")
    env.pop("MWPGEN_MIRROR")
    pool = f"mwpgen-test-{uuid.uuid4().hex[:8]}"
    run_in(parent, env, [sys.executable, "-m", "prefect", "work-pool", "create", pool, "--type", "process"])
    run_in(parent, {**env, "MWPGEN_HOME": str(parent)},
           [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--name", "mwpgen-fold", "--pool", pool])
    procs = []
    for w in workers:
        wlog = open(w / "worker.log", "w")
        procs.append(subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", "--pool", pool,
                                       "--limit", "1", "--type", "process"],
                                      cwd=w, env={**env, "MWPGEN_HOME": str(w), "PREFECT_HOME": str(w / ".prefect")},
                                      stdout=wlog, stderr=subprocess.STDOUT, start_new_session=True))
    killed: list = []
    done = threading.Event()
    killer = threading.Thread(target=kill_fold_run_when_training, args=(KILLED_FOLD, workers, done, killed))
    killer.start()
    start = time.time()
    try:
        proc = run_in(parent, env, [sys.executable, "-m", "flows.folds", "--concurrency", "2"], check=False,
                      timeout=900)
    finally:
        done.set()
        killer.join()
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
    logs = "\n".join((w / "worker.log").read_text()[-3000:] for w in workers)
    return {"root": root, "base": base, "parent": parent, "remote": remote, "workers": workers, "env": env,
            "proc": proc, "killed": killed, "wall_s": time.time() - start, "worker_logs": logs}


def test_both_folds_reach_the_report(fanned_out):
    proc = fanned_out["proc"]
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n{fanned_out['worker_logs']}"
    report = json.loads((fanned_out["parent"] / "metrics" / "report.json").read_text())
    text = json.dumps(report)
    for fold in FOLDS:  # every fold's scores came back to the submitting clone through the remote
        assert (fanned_out["parent"] / "results" / "scores" / "gpt_pre" / "arithmetic" / f"fold{fold}.json").exists()
    assert "gpt_pre" in text or "GPT-pre" in text


def test_the_killed_fold_was_retried_and_completed(fanned_out):
    assert fanned_out["killed"], "the fold run was never seen running with its evaluator trained"
    runs = fold_flow_runs(KILLED_FOLD)
    states = sorted(r.state_type.value for r in runs)
    assert "CRASHED" in states and "COMPLETED" in states, states
    killed_id = fanned_out["killed"][0][0]
    assert next(r for r in runs if str(r.id) == killed_id).state_type.value == "CRASHED"
    assert [r.state_type.value for r in fold_flow_runs(0)] == ["COMPLETED"]  # the other fold ran once


def test_a_fresh_clone_pulls_the_results_and_has_nothing_to_reproduce(fanned_out, tmp_path):
    parent = fanned_out["parent"]
    # What the run's owner commits: dvc.lock, the outputs DVC does not cache (metrics, reports, scores) and the
    # .gitignore files DVC wrote for the cached ones.
    subprocess.run(["git", "add", "-A"], cwd=parent, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results"], cwd=parent,
                   check=True)
    fresh = clone(parent, tmp_path / "fresh")
    env = scratch_env(fresh)
    run_in(fresh, env, [sys.executable, "-m", "dvc", "pull"])
    for fold in FOLDS:
        assert (fresh / "results" / "generations" / "gpt_pre" / "arithmetic" / f"fold{fold}.csv").exists()
        assert (fresh / "models" / "gpt_pre" / "arithmetic" / f"fold{fold}").is_dir()
    status = run_in(fresh, env, [sys.executable, "-m", "dvc", "status"]).stdout
    assert "up to date" in status, status
