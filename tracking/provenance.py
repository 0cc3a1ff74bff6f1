"""What a run is: the git commit of the code (and whether the work tree differs from it), the profile its params
came from, the DVC experiment it belongs to, and which `dvc repro` / `dvc exp run` started it.

Every MLflow run of the project is tagged with `run_tags()`. Only documented interfaces are read: git's porcelain
commands, the environment DVC gives a stage's command (DVC_ROOT, DVC_STAGE; DVC_EXP_NAME and DVC_EXP_BASELINE_REV
under `dvc exp run`: https://dvc.org/doc/user-guide/env) and the process tree (psutil).
"""

from __future__ import annotations

import os
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

from mwpgen.config.files import ParamsError, read_yaml
from mwpgen.paths import PROJECT_ROOT

PROFILE_ENV = "MWPGEN_PROFILE"  # a wrapper that applied a profile may name it; else it is recognised in params.yaml
REPRO_ID_ENV = "MWPGEN_REPRO_ID"  # a wrapper may name the repro its stages share; else the `dvc` process is found
DVC_STAGE_ENV = "DVC_STAGE"  # set by DVC for every stage command it runs
DVC_EXP_NAME_ENV = "DVC_EXP_NAME"  # set by `dvc exp run`
DVC_EXP_BASELINE_ENV = "DVC_EXP_BASELINE_REV"

COMMIT_TAG = "mlflow.source.git.commit"  # MLflow's own system tag: the run page shows it
DIRTY_TAG = "mwpgen.git_dirty"
PROFILE_TAG = "mwpgen.profile"
EXPERIMENT_TAG = "mwpgen.dvc_experiment"
BASELINE_TAG = "mwpgen.dvc_baseline"

# Files a repro itself rewrites (DVC's lock, stage outputs kept in git): changed, they do not make the code dirty.
PIPELINE_WRITES = ("dvc.lock", "metrics/", "timing/", "results/", "reports/", "plots/")


def _git(*args: str, root: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit(root: Path = PROJECT_ROOT) -> str | None:
    out = _git("rev-parse", "HEAD", root=root)
    return out.strip() if out else None


def dirty_paths(root: Path = PROJECT_ROOT) -> list[str] | None:
    """Tracked files that differ from the commit, other than what a repro writes (PIPELINE_WRITES); None outside git."""
    out = _git("status", "--porcelain", "--untracked-files=no", root=root)
    if out is None:
        return None
    paths = [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]
    return [p for p in paths if not p.startswith(PIPELINE_WRITES)]


def _leaves(doc: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def active_profile(params_path: Path = PROJECT_ROOT / "params.yaml",
                   profiles_dir: Path = PROJECT_ROOT / "profiles") -> str:
    """MWPGEN_PROFILE if set; else the profiles (profiles/*.yaml) all of whose values params.yaml holds, joined by
    "+" ("default" for none). A profile that happens to equal the defaults in every value counts as applied."""
    if os.environ.get(PROFILE_ENV):
        return os.environ[PROFILE_ENV]
    try:
        params = _leaves(read_yaml(params_path) or {})
    except (ParamsError, OSError):
        return "unknown"
    applied = []
    for path in sorted(Path(profiles_dir).glob("*.yaml")):
        try:
            profile = read_yaml(path)
        except ParamsError:
            continue
        if isinstance(profile, dict) and profile and all(params.get(k, object()) == v
                                                         for k, v in _leaves(profile).items()):
            applied.append(path.stem)
    return "+".join(applied) or "default"


@lru_cache(maxsize=1)
def machine() -> dict:
    """Where and from what code a stage computed: the CPU and its kind (mwpgen.device.cpu_kind), the GPU if one is
    used, the commit and whether the code differed from it. Kept beside a stage's timings (flows.common.write_metrics),
    so every per-fold row says which machine and commit it came from."""
    import torch

    from mwpgen.device import cpu_kind

    out = cpu_kind()
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    commit, dirty = git_commit(), dirty_paths()
    out["commit"] = commit[:12] if commit else "unknown"
    out["code_dirty"] = bool(dirty) if dirty is not None else None
    return out


@lru_cache(maxsize=1)
def run_tags() -> dict[str, str]:
    """Tags every run of this process carries (computed once: a stage's runs share its code and params)."""
    tags = {PROFILE_TAG: active_profile()}
    if commit := git_commit():
        tags[COMMIT_TAG] = commit
    if (dirty := dirty_paths()) is not None:
        tags[DIRTY_TAG] = "true" if dirty else "false"
        if dirty:
            tags["mwpgen.git_dirty_paths"] = " ".join(dirty)[:4000]
    if name := os.environ.get(DVC_EXP_NAME_ENV):
        tags[EXPERIMENT_TAG] = name
    if baseline := os.environ.get(DVC_EXP_BASELINE_ENV):
        tags[BASELINE_TAG] = baseline
    return tags


def _is_dvc(cmdline: list[str]) -> bool:
    """`dvc …`, `python …/bin/dvc …` or `python -m dvc …`."""
    head = [os.path.basename(a) for a in cmdline[:3]]
    return "dvc" in head or cmdline[1:3] == ["-m", "dvc"]


def repro_id() -> str | None:
    """One id per `dvc repro` / `dvc exp run` that runs this stage: MWPGEN_REPRO_ID if a wrapper set it; else, for a
    command DVC runs (DVC_STAGE set), the nearest `dvc` process above this one, by host, pid and start time (a reused
    pid has another start time), and the experiment's name under `dvc exp run` (one queue worker runs many).
    None when no DVC command runs this process."""
    if os.environ.get(REPRO_ID_ENV):
        return os.environ[REPRO_ID_ENV]
    if not os.environ.get(DVC_STAGE_ENV):
        return None
    import psutil

    try:
        for process in psutil.Process().parents():
            if _is_dvc(process.cmdline()):
                experiment = os.environ.get(DVC_EXP_NAME_ENV)
                return (f"{socket.gethostname()}/{process.pid}/{int(process.create_time() * 1000)}"
                        + (f"/{experiment}" if experiment else ""))
    except psutil.Error:
        return None
    return None
