"""`python -m orchestration.status` and the pipeline's note on a clone whose DVC remote folder does not exist: they
say so and point to `python -m orchestration.archive pull` for the per-problem results git holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from orchestration.status import archive_restorable, missing_remote_folder, remote_note, report

MD5 = "0123456789abcdef0123456789abcdef"


def _clone(tmp_path: Path) -> Path:
    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True)
    # as this project's .dvc/config has it: a folder beside the clone, relative to .dvc/
    (repo / ".dvc" / "config").write_text("[core]\n    remote = storage\n['remote \"storage\"']\n"
                                          "    url = ../../mwpgen-dvc-remote\n")
    (repo / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"generate@ours-arithmetic-0": {
        "cmd": "python -m flows.generate", "outs": [{"path": "results/generations/ours/arithmetic/fold0.jsonl",
                                                     "md5": MD5, "size": 3}]}}}))
    stored = repo / "archive" / "files" / "md5" / MD5[:2] / MD5[2:]
    stored.parent.mkdir(parents=True)
    stored.write_text("{}\n")
    return repo


def test_a_missing_remote_folder_is_named_with_the_archive_that_restores_the_results(tmp_path):
    repo = _clone(tmp_path)
    assert missing_remote_folder(repo) == ("storage", tmp_path / "mwpgen-dvc-remote")
    assert archive_restorable(repo) == ["results/generations/ours/arithmetic/fold0.jsonl"]
    note = remote_note(repo)
    assert f"the DVC remote 'storage' ({tmp_path / 'mwpgen-dvc-remote'}) does not exist" in note
    assert "1 per-problem results of the committed run are in git: `python -m orchestration.archive pull`" in note
    lines = report(repo)
    assert "does not exist on this machine: `dvc pull` fails" in lines[0]
    assert lines[1].startswith("archive/: 1 per-problem results of dvc.lock missing here -> "
                               "`python -m orchestration.archive pull` restores them")

    (tmp_path / "mwpgen-dvc-remote").mkdir()  # the remote is there: nothing to say
    assert missing_remote_folder(repo) is None and remote_note(repo) is None
    assert report(repo)[0] == f"DVC remote 'storage': {tmp_path / 'mwpgen-dvc-remote'}"


def test_a_clone_where_nothing_ran_yet_has_nothing_to_restore(tmp_path):
    repo = _clone(tmp_path)
    (repo / "dvc.lock").unlink()
    assert archive_restorable(repo) == []
    assert "archive pull" not in remote_note(repo)
