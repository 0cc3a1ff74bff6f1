"""A scratch copy of the project with its own stores, and running commands in it: for the tests (through
tests/conftest.py), tests/helpers/fold_scenario.py and benchmarks/bench_folds.py. No pytest here."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIRROR = Path(os.environ.get("MWPGEN_MIRROR", ROOT.parent / "shared" / "data" / "raw")).resolve()


def copy_project(dest: Path) -> None:
    """Tracked and untracked-not-ignored files (not the committed results, metrics or lock) into a fresh git repo."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file() and not rel.startswith(("metrics/", "dvc.lock", "reports/", "results/",
                                                            "plots/", "archive/")):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"], cwd=dest, check=True)


def scratch_env(dest: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "MWPGEN_MIRROR": str(MIRROR), "PREFECT_HOME": str(dest / ".prefect"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}", "DVC_NO_ANALYTICS": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "MLFLOW_DISABLE_TELEMETRY": "true",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}
    env.pop("MWPGEN_PARENT_RUN_ID", None)
    env.update(extra)
    return env


def run_in(dest: Path, env: dict, cmd: list[str], check: bool = True, timeout: int = 900):
    proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def add_synthetic_readings(dest, records: list[dict], test_ids: list[str]) -> None:
    """Readings of the synthetic problems, appended to the copied corpus as a reader's batch would be: for each of
    12 problems outside the test fold its own text read right and a wrong one (the question about a given number)
    read wrong, written from two context words. Stage tune keeps the readings of training problems and leaves the
    corpus's real ones out (their ids are not this synthetic split's training problems)."""
    corpus = dest / "data" / "labels" / "corpus"
    chosen = [r for r in records if r["id"] not in set(test_ids)][:12]
    key, problems, labels, candidates = [], [], [], []
    for n, r in enumerate(chosen):
        context = " ".join(r["text"].split()[:2])
        wrong = r["text"].rsplit(" . ", 1)[0] + " . How many does she have at first ?"
        for sample, (text, label) in enumerate(((r["text"], 1), (wrong, 0))):
            uid = f"s{2 * n + sample:05d}"
            key.append([uid, "train", r["id"], "synthetic", "ours", "synthetic", sample])
            problems.append([uid, r["equation"], text])
            labels.append([uid, label, "synthetic"])
            candidates.append(["train", r["id"], r["equation"], "synthetic", context, "ours", "synthetic", sample,
                               text])
    for name, rows in (("key.csv", key), ("problems.csv", problems)):
        with open(corpus / name, "a", newline="") as f:
            csv.writer(f).writerows(rows)
    with open(corpus / "labels" / "batch_99.csv", "w", newline="") as f:
        csv.writer(f).writerows([["uid", "label", "note"], *labels])
    with open(corpus / "candidates" / "synthetic_train.csv", "w", newline="") as f:
        csv.writer(f).writerows([["split", "id", "equation", "shape", "context", "model", "source", "sample",
                                  "generated"], *candidates])
