"""`python -m orchestration.undo`: put back, as the last commit has them, the files a pipeline run (a smoke "first
look", a profile) changed in git: params.yaml, dvc.lock, the .gitignore files DVC writes, and the pipeline's
outputs kept in git (OUTPUT_DIRS: metrics, plots, reports, per-problem scores). Staged changes too: DVC's autostage
(.dvc/config) stages dvc.lock and .gitignore as it writes them, so `git checkout params.yaml dvc.lock` would restore
the run's lock from the index, not the committed one. Files the run created there that git does not know are
removed. Nothing else is touched (your own edits elsewhere stay); DVC's cached outputs (models, generations) are not
git's: `dvc checkout` then puts back the ones this clone's DVC cache holds.

    python -m orchestration.undo           # what it would restore or remove, then does it
    python -m orchestration.undo --dry-run # only the list
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("params.yaml", "dvc.lock")
OUTPUT_DIRS = ("metrics/", "plots/", "reports/", "results/")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def _ours(path: str) -> bool:
    return path in FILES or path.startswith(OUTPUT_DIRS) or path.rsplit("/", 1)[-1] == ".gitignore"


def changed(root: Path) -> tuple[list[str], list[str]]:
    """(tracked or staged paths that differ from HEAD, untracked files) among what a pipeline run writes."""
    tracked = [p for p in _git(root, "diff", "--name-only", "HEAD", "--").splitlines() if _ours(p)]
    untracked = [p for p in _git(root, "ls-files", "--others", "--exclude-standard").splitlines()
                 if p.startswith(OUTPUT_DIRS)]
    return tracked, untracked


def undo(root: Path = ROOT, dry_run: bool = False) -> tuple[list[str], list[str]]:
    tracked, untracked = changed(root)
    if not dry_run:
        if tracked:  # index and worktree both from HEAD; a path HEAD lacks (staged new) is removed from both
            _git(root, "restore", "--source=HEAD", "--staged", "--worktree", "--", *tracked)
        for path in untracked:
            (root / path).unlink()
    return tracked, untracked


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--dry-run", action="store_true", help="list what would be restored or removed; change nothing")
    args = cli.parse_args()
    tracked, untracked = undo(dry_run=args.dry_run)
    verb = ("would restore", "would remove") if args.dry_run else ("restored", "removed")
    print(f"{verb[0]} {len(tracked)} files from HEAD (index and working tree), {verb[1]} {len(untracked)} new output "
          "files" + (":" if tracked or untracked else ""))
    for path in tracked:
        print(f"  {path}")
    for path in untracked:
        print(f"  {path} (new)")
    if not args.dry_run:
        print("DVC's cached outputs (models, generations): `dvc checkout` puts back those this clone's cache holds")


if __name__ == "__main__":
    main()
