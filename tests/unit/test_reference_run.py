"""`python -m tracking.reference_run`: the committed results as the run `reference · <commit>`, once per commit."""

from __future__ import annotations

import json
import subprocess

import pytest


@pytest.fixture
def committed(tmp_path, monkeypatch):
    """A scratch checkout with committed results in the project's layout, and an empty MLflow store."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    root = tmp_path / "clone"
    files = {"metrics/report.json": {"ours": {"arithmetic": {"bleu4": 0.19}}},
             "metrics/splits.json": {"arithmetic": {"folds": 5}},
             "results/scores/ours/arithmetic/fold0.json": {"model": "ours", "fold": 0, "bleu4": 0.19,
                                                           "timings_s": {"parse": 36.3}},
             "metrics/train/ours/arithmetic/fold0.json": {"steps": 3, "wall_s": 60.0}}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(json.dumps(data))
    (root / "reports").mkdir()
    (root / "reports/README.md").write_text("# tables\n")
    (root / "plots/train/ours/arithmetic").mkdir(parents=True)
    (root / "plots/train/ours/arithmetic/fold0.csv").write_text("step,train_loss,val_loss\n1,2.0,\n2,1.0,1.5\n")

    def git(*a):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "results")
    return root, git("rev-parse", "HEAD")


def test_the_committed_results_become_one_reference_run_and_a_second_call_skips(committed, capsys):
    from tracking.reference_run import main
    from tracking.runs import client, experiment_id

    root, commit = committed
    assert main(["--root", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"reference · {commit[:7]}: logged (run ")
    c = client()
    runs = {r.info.run_name: r for r in c.search_runs([experiment_id(c)])}
    top, fold = runs[f"reference · {commit[:7]}"], runs["ours · arithmetic · fold 0"]
    assert top.data.tags["mlflow.source.git.commit"] == commit and top.info.status == "FINISHED"
    assert top.data.metrics == {"ours.arithmetic.bleu4": 0.19, "splits.arithmetic.folds": 5}
    assert fold.data.metrics == {"bleu4": 0.19, "time/timings_s.parse": 36.3, "steps": 3, "time/wall_s": 60.0,
                                 "train_loss": 1.0, "val_loss": 1.5}
    assert runs["ours · arithmetic"].data.tags["mlflow.parentRunId"] == top.info.run_id
    assert [a.path for a in c.list_artifacts(top.info.run_id)] == ["metrics", "reports"]

    assert main(["--root", str(root)]) == 0
    second = capsys.readouterr().out
    assert "already logged" in second and "skipped" in second
    assert len(c.search_runs([experiment_id(c)])) == 3

    assert main(["--root", str(root), "--replace"]) == 0
    assert ": replaced (run " in capsys.readouterr().out
    names = sorted(r.info.run_name for r in c.search_runs([experiment_id(c)]))
    assert names == sorted([f"reference · {commit[:7]}", "ours · arithmetic", "ours · arithmetic · fold 0"])
