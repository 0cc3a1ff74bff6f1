"""The many-machines setup on one machine, for tests/pipeline/test_folds.py and benchmarks/bench_folds.py: a scratch
project (synthetic Arithmetic data, a tiny model, two folds) committed to git, a local-folder DVC remote, a process work
pool with the `mwpgen-fold` deployment, and N Prefect workers, each in its own clone. Needs a running Prefect server
(PREFECT_API_URL)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from orchestration.local_server import stop_group
from orchestration.prefect_api import sigint_at_default
from tests.helpers.scratch_project import add_synthetic_readings, copy_project, run_in, scratch_env
from tests.helpers.synthetic_mwp import synthetic_records
from tests.helpers.tiny_model import tiny_model_dir

FOLDS = [0, 1]
# The data stages are the same on every machine; here the data is synthetic and committed, so they are dropped.
DATA_STAGES = ("download", "translate", "preprocess", "split", "register")


def base_project(root: Path, remote: Path) -> Path:
    base = root / "base"
    base.mkdir(parents=True)
    copy_project(base)
    records = synthetic_records(50, id_prefix="syn")
    write_jsonl(base / "data" / "processed" / "arithmetic.jsonl", records)
    write_json(
        base / "data" / "splits" / "arithmetic.json",
        {"dataset": "arithmetic", "n_folds": 5, "seed": 1, "method": "seeded", "folds": seeded_folds(records, 5, 1)},
    )
    # Readings of its own problems: the real corpus is of real Arithmetic problems, which this split does not hold.
    add_synthetic_readings(base, records, seeded_folds(records, 5, 1)[0])
    corpus = [r["text"] + " " + r["equation"] for r in records] + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE]
    tiny_model_dir(base / "tiny-model", corpus)
    stages = yaml.safe_load((base / "dvc.yaml").read_text())
    for name in DATA_STAGES:
        del stages["stages"][name]
    (base / "dvc.yaml").write_text(yaml.safe_dump(stages, sort_keys=False))
    params = yaml.safe_load((base / "params.yaml").read_text())
    params["experiment"].update(datasets=["arithmetic"], folds=FOLDS, validation_size=4)
    # The fewest stages a report needs: the evaluator and ours (Table 5); the other models' stages are the same
    # DVC mechanics (tests/pipeline/test_pipeline_models.py runs them).
    params["models"] = {"causal_lm": [], "seq2seq": [], "generate": ["ours"]}
    params["train"].update(model="tiny-model", log_every=5)
    for kind in ("generator", "evaluator"):
        params["train"][kind].update(max_steps=30, batch_size=8, lr=3e-3, save_every=5)
    params["generate"].update(max_new_tokens=20, batch_size=8)
    params["judge"].update(layer=1, finetune_layers=1)  # 1 of the tiny model's 2 layers, fine-tuned as by default
    # No tuning on readings: the same stage on one fold, run end to end by tests/pipeline/test_pipeline_models.py
    params["tuning"]["methods"] = []
    params["serve"]["model"] = "ours"
    (base / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = scratch_env(base)
    run_in(base, env, [sys.executable, "-m", "dvc", "remote", "modify", "storage", "url", str(remote)])
    run_in(base, env, ["git", "add", "-A", "-f", "data", "tiny-model", "dvc.yaml", "params.yaml", ".dvc/config"])
    run_in(base, env, ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "fold scenario"])
    return base


def clone(source: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True)
    return dest


@dataclass
class Cluster:
    root: Path
    base: Path
    parent: Path
    workers: list[Path]
    env: dict

    def submit(self, concurrency: int = 2, timeout: int = 900) -> subprocess.CompletedProcess:
        """`python -m orchestration.fan_out` in the parent clone: every fold, then the report."""
        return run_in(
            self.parent,
            self.env,
            [sys.executable, "-m", "orchestration.fan_out", "--concurrency", str(concurrency)],
            check=False,
            timeout=timeout,
        )

    def worker_logs(self, tail: int = 3000) -> str:
        return "\n".join((w / "worker.log").read_text()[-tail:] for w in self.workers if (w / "worker.log").exists())


@contextmanager
def cluster(root: Path, n_workers: int) -> Iterator[Cluster]:
    """The scenario with `n_workers` process workers (one flow run at a time each), stopped on exit."""
    remote = root / "remote"
    base = base_project(root, remote)
    workers = [clone(base, root / f"worker{i}") for i in range(1, n_workers + 1)]
    parent = clone(base, root / "parent")
    env = scratch_env(parent, MLFLOW_TRACKING_URI=f"sqlite:///{root / 'mlflow.db'}", PREFECT_LOGGING_LEVEL="INFO")
    env.pop("MWPGEN_MIRROR")
    pool = f"mwpgen-test-{uuid.uuid4().hex[:8]}"
    run_in(parent, env, [sys.executable, "-m", "prefect", "work-pool", "create", pool, "--type", "process"])
    run_in(parent, {**env, "MWPGEN_HOME": str(parent)},
           [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--name", "mwpgen-fold", "--pool", pool])
    procs = []
    try:
        for w in workers:
            with open(w / "worker.log", "w") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "prefect",
                            "worker",
                            "start",
                            "--pool",
                            pool,
                            "--limit",
                            "1",
                            "--type",
                            "process",
                        ],
                        cwd=w,
                        env={**env, "MWPGEN_HOME": str(w), "PREFECT_HOME": str(w / ".prefect")},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=sigint_at_default,
                    )
                )
        yield Cluster(root, base, parent, workers, env)
    finally:
        for p in procs:
            stop_group(p)
