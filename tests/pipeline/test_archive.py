"""orchestration/archive.py: the per-problem results travel in git (archive/), the models do not; a fresh clone gets
them back in the workspace and the DVC cache, so DVC sees them as this machine's own, also for stages the current
params.yaml does not list."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestration import archive

STAGES = """stages:
  make:
    cmd: >-
      mkdir -p results/generations/m results/predictions/m models/m &&
      echo "id,generated" > results/generations/m/fold0.csv &&
      echo '{"id": 1}' > results/predictions/m/fold0.jsonl &&
      echo weights > models/m/w.bin
    outs:
      - results/generations/m/fold0.csv
      - results/predictions/m/fold0.jsonl
      - models/m
"""
RESULTS = ["results/generations/m/fold0.csv", "results/predictions/m/fold0.jsonl"]


def _dvc(repo: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def _fresh_machine(repo: Path) -> None:
    """What a new machine has of this clone: what git carries."""
    for gone in (".dvc/cache", "results", "models"):
        shutil.rmtree(repo / gone, ignore_errors=True)


def _project_that_ran(tmp_path: Path) -> Path:
    """A git + DVC project whose one stage has run: results and a model in its workspace and DVC cache."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _dvc(repo, "init", "-q")
    (repo / "dvc.yaml").write_text(STAGES)
    _dvc(repo, "repro", "-q")
    return repo


def test_results_come_back_from_the_archive_and_models_stay_out(tmp_path):
    repo = _project_that_ran(tmp_path)

    assert archive.push(repo) == RESULTS
    assert len([p for p in (repo / "archive").rglob("*") if p.is_file()]) == 2  # the model is not archived

    _fresh_machine(repo)
    assert archive.pull(repo) == RESULTS
    assert (repo / "results" / "predictions" / "m" / "fold0.jsonl").read_text() == '{"id": 1}\n'
    assert not (repo / "models" / "m").exists()
    status = _dvc(repo, "status")
    assert "models/m" in status and "results/" not in status  # the results are DVC's own again, cached

    # the stage gone from dvc.yaml (a variant the current params.yaml does not list): dvc.lock still names it
    (repo / "dvc.yaml").write_text("stages: {}\n")
    _fresh_machine(repo)
    assert archive.pull(repo) == RESULTS
    assert archive.pull(repo) == []  # a workspace file that is the one dvc.lock names is left alone

    # an edited file is not archived in place of the one the lock names
    (repo / "results" / "generations" / "m" / "fold0.csv").write_text("edited\n")
    assert archive.push(repo) == RESULTS[1:]


def test_pull_replaces_another_runs_copy_and_refuses_to_lose_an_edit(tmp_path):
    """A clone that pulled before a rerun's dvc.lock came in holds the old run's files: pull must replace them (the
    report would otherwise pair new scores with old generations), but never a file kept nowhere else."""
    repo = _project_that_ran(tmp_path)
    generations = repo / RESULTS[0]
    old_run = generations.read_text()
    archive.push(repo)

    (repo / "dvc.yaml").write_text(STAGES.replace('"id,generated"', '"id,generated,rerun"'))
    _dvc(repo, "repro", "-q")  # the rerun: a new dvc.lock and a new file, the old one still in the DVC cache
    new_run = generations.read_text()
    assert new_run != old_run
    archive.push(repo)

    generations.write_text(old_run)  # what a clone that pulled before the rerun holds
    assert archive.pull(repo) == [RESULTS[0]]
    assert generations.read_text() == new_run
    assert "results/" not in _dvc(repo, "status")

    generations.write_text("edited by hand\n")
    with pytest.raises(SystemExit, match="results/generations/m/fold0.csv"):
        archive.pull(repo)
    assert generations.read_text() == "edited by hand\n"  # nothing lost
