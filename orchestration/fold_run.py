"""One (dataset, fold) of the pipeline, on whichever machine's Prefect worker picks it up.

In the worker's own clone of the project (its working directory, `MWPGEN_HOME`), the fold's stages run as they do
on one machine: `dvc pull` what the DVC remote already holds, `dvc repro` the fold's stages (DVC adds the shared
data stages they depend on and skips what is up to date, so a rerun after a crash resumes; a killed training
resumes from its own checkpoint), `dvc push` what they produced. The fold's `dvc.lock` entries -- the addresses
of its outputs in the remote -- and the small outputs DVC does not cache (metrics, scores, training curves: they
live in git, not in the remote) go to the Prefect server as a markdown artifact (`dvc-lock-<dataset>-<fold>`), so
the run that submitted the fold (orchestration/fan_out.py) needs nothing from this machine but the remote and the
server.

Stage runs log to MLflow beneath `parent_run_id` (MLFLOW_TRACKING_URI must then name a tracking server every
machine reaches; the default sqlite file is per clone).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from orchestration.prefect_api import api_env
from tracking.runs import PARENT_ENV

ROOT = Path(os.environ.get("MWPGEN_HOME") or Path(__file__).resolve().parent.parent)
FENCE = "```json"


class FoldError(RuntimeError):
    pass


class DvcCommandError(RuntimeError):
    pass


def dvc(args: list[str], cwd: Path, env: dict | None = None) -> str:
    """Run one DVC command, echoing its output; a failure raises with the command and the end of its output."""
    proc = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=env, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    print(output, end="", flush=True)
    if proc.returncode != 0:
        raise DvcCommandError(f"`dvc {' '.join(args)}` in {cwd} exited with {proc.returncode}: "
                              f"{output.strip()[-1500:]}")
    return output


def outputs_of(repo, stages: set[str] | list[str]) -> list:
    """The outputs (DVC `Output`s) of the named pipeline stages of an open DVC `Repo`."""
    return [out for stage in repo.index.stages if getattr(stage, "name", None) in stages for out in stage.outs]


def is_fold_stage(name: str, dataset: str, fold: int) -> bool:
    """Matrix stages of this fold: `train_generator@gpt-arithmetic-0`, `keywords@arithmetic-0`, ... (not
    `...-arithmetic-10`)."""
    _, _, item = name.partition("@")
    return item == f"{dataset}-{fold}" or item.endswith(f"-{dataset}-{fold}")


def fold_stages(root: Path, dataset: str, fold: int) -> list[str]:
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        stages = [s.name for s in repo.index.stages if is_fold_stage(getattr(s, "name", ""), dataset, fold)]
    if not stages:
        raise FoldError(f"dvc.yaml in {root} has no stage of {dataset} fold {fold}: is it in params.yaml's "
                        "experiment.datasets and experiment.folds?")
    return stages


def params_digest(root: Path) -> str:
    return hashlib.sha256((root / "params.yaml").read_bytes()).hexdigest()


def fold_markdown(entries: dict, files: dict[str, str]) -> str:
    """The artifact's text: {"lock": dvc.lock entries, "files": uncached output path -> content} as a JSON block."""
    return f"{FENCE}\n{json.dumps({'lock': entries, 'files': files}, indent=1)}\n```\n"


def read_fold_markdown(text: str) -> tuple[dict, dict[str, str]]:
    payload = json.loads(text.split(FENCE, 1)[1].rsplit("```", 1)[0])
    return payload["lock"], payload["files"]


def uncached_outputs(root: Path, stages: list[str]) -> dict[str, str]:
    """Path (relative to `root`) -> text of every file the `stages` write with `cache: false`."""
    from dvc.repo import Repo

    files = {}
    with Repo(str(root)) as repo:
        for out in outputs_of(repo, stages):
            path = Path(out.fs_path)
            if out.use_cache or not path.exists():
                continue
            for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
                if f.is_file() and f.name != ".gitignore":
                    files[str(f.relative_to(root))] = f.read_text()
    return files


def artifact_key(dataset: str, fold: int) -> str:
    return f"dvc-lock-{dataset.replace('_', '-')}-{fold}"


@task(cache_policy=NO_CACHE)
def pull(root: Path) -> None:
    """What the remote already has (a fold finished elsewhere, or the shared data stages); missing is fine. Outputs
    a killed run left half-made are replaced (--force); its resume state (checkpoints/) is not an output and stays."""
    dvc(["pull", "--allow-missing", "--force"], root)


@task(cache_policy=NO_CACHE)
def reproduce(root: Path, stages: list[str], parent_run_id: str | None) -> None:
    # The stages report to this flow run's Prefect API (the worker's), not each to a temporary server of its own.
    env = {**os.environ, **api_env(), **({PARENT_ENV: parent_run_id} if parent_run_id else {})}
    dvc(["repro", *stages], root, env)


@task(cache_policy=NO_CACHE)
def push(root: Path, stages: list[str]) -> None:
    dvc(["push", "--with-deps", *stages], root)


@flow(name="fold")
def fold(dataset: str, fold: int, parent_run_id: str | None = None, params_sha256: str | None = None,
         push_outputs: bool = True) -> dict:
    """Reproduce one (dataset, fold) in this worker's clone and publish its dvc.lock entries and uncached outputs;
    returns the entries."""
    log = get_run_logger()
    root = ROOT
    if params_sha256 and params_digest(root) != params_sha256:
        raise FoldError(f"{root / 'params.yaml'} differs from the submitting run's (sha256 {params_sha256[:12]}): "
                        "check out the same commit and profile in every worker's clone")
    stages = fold_stages(root, dataset, fold)
    log.info("%s fold %d in %s: %s", dataset, fold, root, " ".join(stages))
    if push_outputs:
        pull(root)
    reproduce(root, stages, parent_run_id)
    if push_outputs:
        push(root, stages)
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    entries = {name: entry for name, entry in lock.items() if "@" not in name or is_fold_stage(name, dataset, fold)}
    create_markdown_artifact(fold_markdown(entries, uncached_outputs(root, stages)), key=artifact_key(dataset, fold),
                             description=f"dvc.lock entries and uncached outputs of {dataset} fold {fold}")
    return entries
