"""The layout that README.md and docs/architecture.md describe is the tree's, and README stays a user's page."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _layout_paths() -> set[str]:
    rows = [line for line in _section(README, "Layout").splitlines() if line.startswith("| `")]
    return {p.rstrip("/") for row in rows for p in re.findall(r"`([^`]+)`", row.split("|")[1])}


def _tracked_top_level_dirs() -> set[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return {f.split("/")[0] for f in files if "/" in f and not f.startswith(".")}


def test_every_folder_the_readme_lists_exists_and_every_tracked_folder_is_listed():
    listed = _layout_paths()
    assert all((ROOT / p).is_dir() for p in listed), sorted(p for p in listed if not (ROOT / p).is_dir())
    top = {p.split("/")[0] for p in listed}
    assert _tracked_top_level_dirs() <= top, sorted(_tracked_top_level_dirs() - top)


def test_the_library_row_names_every_subpackage_of_mwpgen():
    row = next(line for line in _section(README, "Layout").splitlines() if line.startswith("| `mwpgen/`"))
    named = set(re.findall(r"`([a-z0-9_]+)/`", row.split("|")[2]))
    packages = {p.parent.name for p in (ROOT / "mwpgen").glob("*/__init__.py")}
    assert named == packages


def test_architecture_names_every_orchestration_module():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `orchestration/`"))
    named = set(re.findall(r"`([a-z_]+\.py)`", row))
    modules = {p.name for p in (ROOT / "orchestration").glob("*.py")} - {"__init__.py"}
    assert named == modules


def test_the_readme_is_a_users_page():
    assert len(README.splitlines()) <= 250
    assert not re.search(r"\bissues? \d+", README)  # no history of the project's issues
    assert "/work/" not in README and "@" + "TODO" not in README
    assert not re.search(r"@[A-Z_]+@", README), "a placeholder was left unfilled"


def test_a_forced_rerun_the_readme_shows_names_its_one_stage():
    """`dvc repro -f STAGE` forces every upstream stage too; `-s` is what reruns the stage alone."""
    for command in re.findall(r"dvc repro -f[^`\n]*", README):
        assert " -s " in f" {command} ", command


def test_the_readme_results_are_the_committed_scores():
    """The Results table's automatic metrics are the committed folds' (results/scores): mean ± population std over
    every Arithmetic fold scored, to the digits shown."""
    import json
    import statistics

    table = _section(README, "Results")
    for model, label in (("gpt_pre", "| GPT-pre"), ("ours", "| ours (")):
        row = next(line for line in table.splitlines() if line.startswith(label))
        folds = sorted((ROOT / "results" / "scores" / model / "arithmetic").glob("fold*.json"))
        scores = [json.loads(path.read_text()) for path in folds]
        assert len(scores) == 5, f"{model}: {len(scores)} Arithmetic folds scored, README's table shows 5"
        for key in ("bleu4", "acc_eq", "acc_eq_equivalent", "consistency_judged"):
            values = [s[key] for s in scores]
            cell = f"{statistics.fmean(values):.3f}±{statistics.pstdev(values):.3f}"
            assert cell in row, f"README's {model} row does not show {key} = {cell}"
