"""`dvc exp run -S key=value` (the README's way to change a setting) reaches the stages as the value meant.

DVC parses the value as YAML 1.2 and writes it back in its own spelling (`-S train.ours.lr=3e-5` writes
`lr: 3e-05`, a float in YAML 1.2, a string in YAML 1.1). A tiny DVC project whose one stage validates the
project's real params.yaml with mwpgen.config.load_params checks that every spelling arrives as a number.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end to end (pytest -m "not slow" skips it)

ROOT = Path(__file__).resolve().parents[2]

STAGE = """\
import json, os, sys
from mwpgen.config.schema import load_params
p = load_params("params.yaml")
with open(os.environ["RUNS_LOG"], "a") as log:  # outside the repo: proves the stage ran (not a run-cache restore)
    log.write("ran\\n")
json.dump({"lr": p.train.ours.lr, "batch_size": p.train.ours.batch_size,
           "mixed_precision": p.train.mixed_precision, "folds": p.experiment.folds}, open("out.json", "w"))
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.fail("git is needed by `dvc exp run`")
    repo = tmp_path_factory.mktemp("exp")
    (repo / "stage.py").write_text(STAGE)
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    (repo / "dvc.yaml").write_text(
        "stages:\n"
        "  echo:\n"
        f"    cmd: {json.dumps(shlex.quote(sys.executable) + ' stage.py')}\n"
        "    deps: [stage.py]\n"
        "    params: [train.ours, train.mixed_precision, experiment.folds]\n"
        "    outs:\n"
        "      - out.json:\n"
        "          cache: false\n")
    _git(repo, "init", "-q")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "RUNS_LOG": str(repo.parent / "runs.log"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, env=env, check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "baseline")
    return repo, env


def _exp_run(repo: Path, env: dict, *sets: str) -> tuple[dict, str]:
    """Run one experiment from the shipped params.yaml; return the stage's output and what DVC wrote."""
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    (repo / "out.json").unlink(missing_ok=True)
    log = Path(env["RUNS_LOG"])
    runs_before = log.read_text().count("ran") if log.exists() else 0
    cmd = [sys.executable, "-m", "dvc", "exp", "run", "--force", *(a for s in sets for a in ("-S", s))]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert log.read_text().count("ran") == runs_before + 1, "the stage did not run"
    return json.loads((repo / "out.json").read_text()), (repo / "params.yaml").read_text()


@pytest.mark.parametrize("spelling", ["3e-5", "3e-05", "0.00003", "3.0e-5", "3E-5"])
def test_lr_spellings_reach_the_stage_as_a_float(repo, spelling):
    out, written = _exp_run(*repo, f"train.ours.lr={spelling}")
    assert "    lr: 3e-05\n" in written  # DVC's own spelling: a string to a YAML 1.1 reader
    assert out["lr"] == 3e-05 and isinstance(out["lr"], float)


def test_int_bool_and_list_reach_the_stage(repo):
    out, written = _exp_run(*repo, "train.ours.batch_size=4", "train.mixed_precision=False", "experiment.folds=[0,1]")
    assert out == {"lr": 5e-05, "batch_size": 4, "mixed_precision": False, "folds": [0, 1]}
    assert "mixed_precision: false" in written
