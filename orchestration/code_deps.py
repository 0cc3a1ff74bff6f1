"""Write dvc.yaml's code deps from each stage's import closure: `python -m orchestration.code_deps` (`--check`: say
what would change and exit 1, write nothing).

A stage depends on every project file its command imports and on no other code: a dep it never runs would make
hours of training stale for an edit to the translator, a missing one would keep a stale model. Keeping 350 such
lines by hand bent the code (constants copied to dodge an import); now they are written, and the suite checks that
writing them would change nothing (tests/pipeline/test_dvc_deps.py).

The closure is static (AST), so it sees imports inside functions too; a package's __init__.py counts for every
module imported from it, unless it is inert (imports and defines nothing). A subpackage whose every file the stage
runs is written as its folder (`mwpgen/lm`), so a file added there is a dep at once. The code deps stay the first
items of a stage's deps, sorted; data deps (and their comments) follow untouched.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mwpgen", "tasks", "flows", "orchestration", "tracking")
CODE_PREFIXES = tuple(f"{p}/" for p in PACKAGES)


def module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imported_modules(root: Path, path: Path) -> set[str]:
    """The project modules one file imports, relative imports resolved."""
    package = ".".join(path.relative_to(root).with_suffix("").parts)
    package = package.removesuffix(".__init__") if path.name == "__init__.py" else package.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return {m for m in found if m.split(".")[0] in PACKAGES}


def closure(root: Path, module: str) -> set[Path]:
    """Every project file that importing `module` executes (relative to root)."""
    seen: set[Path] = set()
    todo = [module]
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):  # the package __init__s on the way
            path = module_file(root, ".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(imported_modules(root, path))
    return {p.relative_to(root) for p in seen}


def is_inert_init(root: Path, path: Path) -> bool:
    """A package __init__ that imports and defines nothing (a docstring, a version string) changes no output."""
    if path.name != "__init__.py":
        return False
    tree = ast.parse((root / path).read_text(encoding="utf-8"))
    return not any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree))


def stage_module(cmd: str) -> str:
    found = re.search(r"python -m (\S+)", cmd)
    if not found:
        raise ValueError(f"dvc.yaml: stage command {cmd!r} does not run `python -m <module>`")
    return found.group(1)


def runs(root: Path, cmd: str) -> set[str]:
    """The project files a stage's command really runs: its import closure, less inert package __init__s."""
    return {str(f) for f in closure(root, stage_module(cmd)) if not is_inert_init(root, f)}


def package_files(root: Path, folder: str) -> set[str]:
    return {str(p.relative_to(root)) for p in (root / folder).rglob("*.py")
            if "__pycache__" not in p.parts and not is_inert_init(root, p.relative_to(root))}


def code_deps(root: Path, cmd: str) -> list[str]:
    """The stage's code deps as written: files, with a subpackage it runs whole written as its folder."""
    files = runs(root, cmd)
    folders = sorted({str(Path(f).parent) for f in files if len(Path(f).parts) > 2}, key=len)
    whole = []
    for folder in folders:  # shortest first, so a package run whole takes its subpackages with it
        if any(folder.startswith(w + "/") for w in whole):
            continue
        if package_files(root, folder) <= files:
            whole.append(folder)
    kept = [f for f in files if not any(f.startswith(w + "/") for w in whole)]
    return sorted(kept + whole)


STAGE = re.compile(r"^  ([A-Za-z_][\w-]*):\s*$")
CMD = re.compile(r"^    cmd:\s*(.+?)\s*$")
DEP_ITEM = re.compile(r"^      - (\S+)")


def rewrite(text: str, root: Path) -> tuple[str, dict[str, tuple[list[str], list[str]]]]:
    """dvc.yaml's text with every stage's leading code deps rewritten, and {stage: (removed, added)} where it
    changed. Line-based, so every comment, data dep and blank line stays as written."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    changes: dict[str, tuple[list[str], list[str]]] = {}
    stage, cmd, i = None, None, 0
    while i < len(lines):
        line = lines[i]
        if m := STAGE.match(line):
            stage, cmd = m.group(1), None
        elif m := CMD.match(line):
            cmd = m.group(1)
        elif line.rstrip() == "    deps:" and stage and cmd:
            out.append(line)
            i += 1
            old = []
            while i < len(lines) and (m := DEP_ITEM.match(lines[i])) and m.group(1).startswith(CODE_PREFIXES):
                old.append(m.group(1))
                i += 1
            new = code_deps(root, cmd)
            if old != new:
                changes[stage] = (sorted(set(old) - set(new)), sorted(set(new) - set(old)))
            out += [f"      - {d}\n" for d in new]
            continue
        out.append(line)
        i += 1
    return "".join(out), changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if dvc.yaml would change")
    args = parser.parse_args(argv)
    path = ROOT / "dvc.yaml"
    text, changes = rewrite(path.read_text(encoding="utf-8"), ROOT)
    for stage, (removed, added) in changes.items():
        print(f"{stage}: " + ", ".join([f"-{d}" for d in removed] + [f"+{d}" for d in added]))
    if not changes:
        print("dvc.yaml: every stage's code deps are its imports")
        return 0
    if args.check:
        print("dvc.yaml: code deps out of date; write them with `python -m orchestration.code_deps`")
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"dvc.yaml: code deps written for {len(changes)} stage(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
