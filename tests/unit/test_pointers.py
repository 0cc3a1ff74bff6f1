"""What documents and comments cite exists: a quoted section of README or a doc (README "Profiles",
docs/method.md 'Departures') is a heading of that file, and a cited project file or folder (docs/..., studies/...)
is in the tree. A renamed section or a moved study otherwise leaves pointers to nowhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# README "Section", README, 'Section', docs/x.md "Section"
SECTION = re.compile(
    r"\b(README|(?:docs|studies|reports|benchmarks)/[\w/.-]+\.md)(?:'s)?,?\s+[\"'“‘]([A-Z][^\"'”’]{2,60})[\"'”’]"
)
# A path after --out or --cache is where a command writes, not a citation.
CITED_PATH = re.compile(r"(?<![\w/.-])(?<!--out )(?<!--cache )((?:docs|studies|reports)/[\w.-]+(?:/[\w.-]+)*)")
# Where pointers live: the code, the configuration and the prose; not data, archives or generated results.
SUFFIXES = (".py", ".yaml", ".md", ".sh", ".toml")
SKIP = ("archive/", "data/", "results/", "metrics/", "plots/", "dvc.lock")


def tracked_sources() -> list[Path]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    chosen = [f for f in files if (f.endswith(SUFFIXES) or f == ".dvc/config") and not f.startswith(SKIP)]
    # This file is left out: its examples of the citation forms cite nothing.
    return [ROOT / f for f in chosen if (ROOT / f).exists() and ROOT / f != Path(__file__).resolve()]


def headings(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    return {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+?)\s*$", text, re.M)}


def exists_or_stem(path: Path) -> bool:
    """A cited path, or the stem of cited files (`reports/table` for table2.md, table3.md, ...)."""
    return path.exists() or (path.parent.is_dir() and any(p.name.startswith(path.name) for p in path.parent.iterdir()))


def section_pointers(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in SECTION.finditer(text)]


def test_the_pattern_finds_the_usual_forms():
    text = """README "Profiles"; (README, 'Departures'); docs/method.md "Why" and README's "Results" section"""
    assert section_pointers(text) == [("README", "Profiles"), ("README", "Departures"), ("docs/method.md", "Why"),
                                      ("README", "Results")]


def test_every_quoted_section_is_a_heading_of_its_file():
    broken = []
    for path in tracked_sources():
        for doc, section in section_pointers(path.read_text(encoding="utf-8", errors="replace")):
            target = ROOT / ("README.md" if doc == "README" else doc)
            if not target.exists() or not any(h == section or h.startswith(section) for h in headings(target)):
                broken.append(f"{path.relative_to(ROOT)}: {doc} \"{section}\"")
    assert not broken, "pointers to sections that do not exist:\n" + "\n".join(broken)


def test_every_cited_doc_or_study_path_exists():
    broken = []
    for path in (p for p in tracked_sources() if not p.relative_to(ROOT).parts[0] == "tests"):  # tests make files
        for m in CITED_PATH.finditer(path.read_text(encoding="utf-8", errors="replace")):
            cited = m.group(1).rstrip(".,:;)")
            if "*" in cited or "<" in cited or "{" in cited:
                continue
            if not exists_or_stem(ROOT / cited):
                broken.append(f"{path.relative_to(ROOT)}: {cited}")
    assert not broken, "cited files that do not exist:\n" + "\n".join(sorted(set(broken)))
