"""`python -m orchestration.undo` puts back what a pipeline run changed in git -- staged by DVC's autostage or not,
new files in the output folders too -- and leaves everything else alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestration.undo import undo

ROOT = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_undo_restores_every_file_a_smoke_run_touched_and_nothing_else(tmp_path):
    repo = tmp_path / "repo"
    committed = {"params.yaml": "experiment: {smoke: false}\n", "dvc.lock": "schema: '2.0'\nstages: {real: {}}\n",
                 "metrics/report.json": "{\"bleu\": 0.19}\n", "plots/train/gpt.csv": "step,loss\n1,2.0\n",
                 "reports/README.md": "# Tables\n", "results/scores/ours.json": "{\"acc\": 0.3}\n",
                 "data/.gitignore": "/processed\n", "mwpgen/code.py": "x = 1\n"}
    for rel, text in committed.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the real run")
    # a smoke run: params rewritten, outputs rewritten, DVC's autostage stages the lock and .gitignore
    for rel in committed:
        if rel != "mwpgen/code.py":
            (repo / rel).write_text("smoke\n")
    _git(repo, "add", "dvc.lock", "data/.gitignore")
    (repo / "dvc.lock").write_text("smoke, after staging\n")
    (repo / "metrics" / "smoke_only.json").write_text("{}\n")  # new, untracked
    (repo / "reports" / "staged_new.md").write_text("new\n")
    _git(repo, "add", "reports/staged_new.md")                  # new, staged
    (repo / "mwpgen" / "code.py").write_text("x = 2  # the user's own edit\n")

    tracked, untracked = undo(repo)

    assert untracked == ["metrics/smoke_only.json"]
    assert "reports/staged_new.md" in tracked and "mwpgen/code.py" not in tracked
    for rel, text in committed.items():
        if rel != "mwpgen/code.py":
            assert (repo / rel).read_text() == text, rel
    assert not (repo / "metrics" / "smoke_only.json").exists() and not (repo / "reports" / "staged_new.md").exists()
    assert (repo / "mwpgen" / "code.py").read_text() == "x = 2  # the user's own edit\n"
    assert _git(repo, "status", "--porcelain") == " M mwpgen/code.py\n"


def test_undo_is_one_command_with_a_dry_run(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "orchestration.undo", "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("would restore ")
