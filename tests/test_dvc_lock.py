"""orchestration/dvc_lock.py: DVC sees only the current stages' lock entries, and the file ends as DVC would write it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestration.dvc_lock import HEADER, merged, restore, split_entries, trimmed_lock

ROOT = Path(__file__).resolve().parent.parent
STAGES = """\
stages:
  make:
    matrix:
      name: ${items}
    cmd: echo ${item.name} ${size} > out_${item.name}.txt
    params: [size]
    outs:
      - out_${item.name}.txt
"""


def _dvc(repo: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def _params(repo: Path, items: list[str], size: int) -> None:
    (repo / "params.yaml").write_text(f"items: [{', '.join(items)}]\nsize: {size}\n")


def _lock_three_stages(repo: Path) -> Path:
    """`repo`, a DVC project (in git if it is a git work tree) whose dvc.lock holds make@a, make@b, make@c."""
    _dvc(repo, "init", "-q", *([] if (repo / ".git").exists() else ["--no-scm"]))
    (repo / "dvc.yaml").write_text(STAGES)
    _params(repo, ["a", "b", "c"], 1)
    _dvc(repo, "repro", "-q")
    return repo


@pytest.fixture(scope="module")
def locked_repo(tmp_path_factory) -> Path:
    """A DVC project whose dvc.lock holds make@a, make@b, make@c (params items [a, b, c], size 1)."""
    repo = tmp_path_factory.mktemp("locked") / "repo"
    repo.mkdir()
    return _lock_three_stages(repo)


@pytest.fixture
def repo(locked_repo, tmp_path) -> Path:
    """A copy of `locked_repo` of this test's own."""
    shutil.copytree(locked_repo, tmp_path / "repo")
    return tmp_path / "repo"


def test_the_committed_lock_splits_into_its_stages_and_merges_back_unchanged():
    text = (ROOT / "dvc.lock").read_text()
    entries = split_entries(text)
    assert entries is not None and len(entries) > 10 and "download" in entries
    assert HEADER + "".join(entries.values()) == text
    some = {name: entries[name] for name in list(entries)[3:7]}
    assert merged(text, HEADER + "".join(some.values())) == text


def test_merged_keeps_places_and_appends_new_entries_in_their_order():
    untrimmed = HEADER + "  a:\n    cmd: x\n  b:\n    cmd: y\n  c:\n    cmd: z\n"
    trimmed = HEADER + "  b:\n    cmd: Y\n  e:\n    cmd: e\n  d:\n    cmd: d\n"
    assert merged(untrimmed, trimmed) == HEADER + ("  a:\n    cmd: x\n  b:\n    cmd: Y\n  c:\n    cmd: z\n"
                                                   "  e:\n    cmd: e\n  d:\n    cmd: d\n")


@pytest.mark.parametrize("text", [
    "schema: '2.0'\nstages: {a: {cmd: x}}\n",                       # flow style
    HEADER + "  a:\n    cmd: x\ndatasets:\n- name: d\n",             # a top-level key after the stages
    "stages:\n  a:\n    cmd: x\n",                                   # no schema line
])
def test_a_lock_laid_out_otherwise_is_not_split(text):
    assert split_entries(text) is None


def test_a_repro_in_a_trimmed_lock_leaves_the_file_dvc_would_have_written(locked_repo, tmp_path):
    plain, trimmed = tmp_path / "plain", tmp_path / "trimmed"
    for repo in (plain, trimmed):
        shutil.copytree(locked_repo, repo)
        _params(repo, ["b", "d"], 2)  # make@b reruns (size changed), make@d is new, make@a and make@c are not stages now
    _dvc(plain, "repro", "-q")
    with trimmed_lock(trimmed) as set_aside:
        assert set_aside == 2
        assert list(split_entries((trimmed / "dvc.lock").read_text())) == ["make@b"]
        _dvc(trimmed, "repro", "-q")
    assert (trimmed / "dvc.lock").read_text() == (plain / "dvc.lock").read_text()
    assert list(split_entries((plain / "dvc.lock").read_text())) == ["make@a", "make@b", "make@c", "make@d"]
    assert not (trimmed / ".dvc" / "tmp" / "dvc.lock.untrimmed").exists()


def test_entries_set_aside_by_a_killed_run_are_put_back_by_the_next(repo):
    before = (repo / "dvc.lock").read_text()
    _params(repo, ["c"], 1)
    killed = subprocess.run([sys.executable, "-c", "import os, signal; from pathlib import Path\n"
                             "from orchestration.dvc_lock import trimmed_lock\n"
                             f"with trimmed_lock(Path({str(repo)!r})) as set_aside:\n"
                             "    print(set_aside, flush=True); os.kill(os.getpid(), signal.SIGKILL)"],
                            cwd=ROOT, capture_output=True, text=True)
    assert killed.returncode == -9 and killed.stdout == "2\n", killed.stderr
    assert list(split_entries((repo / "dvc.lock").read_text())) == ["make@c"]
    with trimmed_lock(repo, names={"make@a"}) as set_aside:  # the next run puts them back before trimming again
        assert set_aside == 2
    assert (repo / "dvc.lock").read_text() == before
    assert not restore(repo)


def test_a_second_run_in_the_same_project_leaves_the_lock_to_the_first(repo):
    before = (repo / "dvc.lock").read_text()
    with trimmed_lock(repo, names={"make@a"}) as first:
        trimmed = (repo / "dvc.lock").read_text()
        with trimmed_lock(repo, names={"make@b"}) as second:
            assert (first, second) == (2, 0)
            assert (repo / "dvc.lock").read_text() == trimmed
    assert (repo / "dvc.lock").read_text() == before


def test_an_error_inside_puts_the_entries_back(repo):
    before = (repo / "dvc.lock").read_text()
    with pytest.raises(KeyboardInterrupt), trimmed_lock(repo, names=set()):
        assert (repo / "dvc.lock").read_text() == "schema: '2.0'\n"
        raise KeyboardInterrupt
    assert (repo / "dvc.lock").read_text() == before


def test_a_dvc_yaml_dvc_cannot_read_leaves_the_lock_whole(repo):
    before = (repo / "dvc.lock").read_text()
    (repo / "dvc.yaml").write_text(STAGES.replace("${items}", "${no_such_param}"))
    with trimmed_lock(repo) as set_aside:
        assert set_aside == 0 and (repo / "dvc.lock").read_text() == before


def test_what_dvc_stages_in_git_is_the_whole_lock(tmp_path):
    """With `core.autostage` (this project's DVC setting) DVC `git add`s dvc.lock after each stage: the trimmed one,
    here. Once whole again, the whole file is staged, as a plain `dvc repro` would have left the index."""
    indexes = []
    for name, trim in (("plain", False), ("trimmed", True)):
        repo = tmp_path / name
        repo.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        _lock_three_stages(repo)
        _dvc(repo, "config", "core.autostage", "true")
        _params(repo, ["b"], 2)
        if trim:
            with trimmed_lock(repo) as set_aside:
                assert set_aside == 2
                _dvc(repo, "repro", "-q")
                assert list(split_entries(subprocess.run(["git", "show", ":dvc.lock"], cwd=repo, check=True,
                                                         capture_output=True, text=True).stdout)) == ["make@b"]
        else:
            _dvc(repo, "repro", "-q")
        indexes.append(subprocess.run(["git", "show", ":dvc.lock"], cwd=repo, check=True, capture_output=True,
                                      text=True).stdout)
        assert indexes[-1] == (repo / "dvc.lock").read_text()
    assert indexes[0] == indexes[1]
