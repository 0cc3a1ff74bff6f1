"""The project files a module really runs: its static import closure within mwpgen/, tasks/, flows/, orchestration/ and tracking/.

Static (AST) analysis, so it is fast and sees imports inside functions too; a package's __init__.py counts for
every module imported from it. Used by tests/test_dvc_deps.py to check each DVC stage's deps.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = ("mwpgen", "tasks", "flows", "orchestration", "tracking")


def module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imported(root: Path, path: Path) -> set[str]:
    package = ".".join(path.relative_to(root).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    else:
        package = package.removesuffix(".__init__")
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
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the package __init__s on the way
            path = module_file(root, ".".join(parts[:i]))
            if path is None or path in seen:
                continue
            seen.add(path)
            todo.extend(_imported(root, path))
    return {p.relative_to(root) for p in seen}
