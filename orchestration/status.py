"""What this clone has and lacks, and what to run about it: `python -m orchestration.status`.

On a fresh clone `dvc status` lists every stage as changed and `dvc pull` fails ("Is your cache up to date?") when the
DVC remote does not hold the run's outputs -- by default a folder beside the clone (`../mwpgen-dvc-remote`, .dvc/config)
that only the machine which ran the pipeline has. This says so: where the remote is and whether it exists, how many
of the committed run's per-problem results `python -m orchestration.archive pull` would restore from git, and what
`dvc status` counts. The pipeline prints the same note about the remote when it starts (`remote_note`), and refuses
an MLflow store it could not write to (`tracking_store_problem`) before anything starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from orchestration import archive

ROOT = Path(__file__).resolve().parent.parent


def dvc_config(root: Path) -> dict[str, str]:
    """`dvc config --list` (repository, local and global files merged; local remote paths made absolute by DVC)."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "config", "--list"], cwd=root, capture_output=True,
                          text=True)
    pairs = (line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def default_remote(root: Path) -> tuple[str, str] | None:
    """(name, url) of the default DVC remote; None when there is none."""
    config = dvc_config(root)
    name = config.get("core.remote")
    return (name, config.get(f"remote.{name}.url", "")) if name else None


def missing_remote_folder(root: Path) -> tuple[str, Path] | None:
    """(name, folder) when the default remote is a local folder that does not exist."""
    remote = default_remote(root)
    if remote is None or "://" in remote[1] or not remote[1]:
        return None
    folder = Path(remote[1])
    folder = folder if folder.is_absolute() else (root / ".dvc" / folder).resolve()
    return None if folder.exists() else (remote[0], folder)


def archive_restorable(root: Path) -> list[str]:
    """Outputs of dvc.lock that archive/ holds and the workspace lacks: what `archive pull` would restore."""
    if not (root / "dvc.lock").exists():  # nothing has run in this clone yet
        return []
    return [path for path, md5 in archive.archived_outputs(root).items()
            if not (root / path).exists() and (root / "archive" / "files" / "md5" / md5[:2] / md5[2:]).exists()]


def remote_note(root: Path) -> str | None:
    """One paragraph for a run whose default remote folder is absent; None otherwise."""
    missing = missing_remote_folder(root)
    if missing is None:
        return None
    name, folder = missing
    note = (f"the DVC remote '{name}' ({folder}) does not exist: `dvc pull` finds nothing there, so outputs this "
            "clone lacks are made again (a push at the end creates it; `dvc remote modify --local "
            f"{name} url ...` points this clone at another)")
    if restorable := archive_restorable(root):
        note += (f"; {len(restorable)} per-problem results of the committed run are in git: "
                 "`python -m orchestration.archive pull` restores them")
    return note


def tracking_store_problem(uri: str) -> str | None:
    """Why MLflow could not write to a sqlite tracking store (one line naming the file), or None. Other stores are
    checked by the pipeline's tracking-server check."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    where = f"the MLflow store {path} (MLFLOW_TRACKING_URI)"
    if not path.exists():
        parent = path.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            return f"{where} cannot be created: its folder {parent} is not a writable folder"
        return None
    if path.is_dir():
        return f"{where} is a folder, not a sqlite file"
    try:  # opened for writing as sqlite opens it (nothing written)
        os.close(os.open(path, os.O_RDWR))
    except OSError as e:
        return f"{where} is not writable ({e.strerror}): check its permissions (`ls -l {path}`)"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"{where} is not writable: its folder {path.parent} is read-only (sqlite writes its journal there)"
    return None


def dvc_status(root: Path) -> tuple[int, int] | None:
    """(stages `dvc status` lists as changed, of them those whose only change is files missing here: outputs and
    deps deleted or not in the cache, nothing modified)."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=root, capture_output=True, text=True)
    try:
        status = json.loads(proc.stdout or "{}")
    except ValueError:
        return None
    stages = {k: v for k, v in status.items() if isinstance(v, list)}

    def only_missing(changes: list) -> bool:
        return all(isinstance(c, dict) and set(c) <= {"changed outs", "changed deps"}
                   and all(set(v.values()) <= {"deleted", "not in cache"} for v in c.values()) for c in changes)

    return len(stages), sum(only_missing(v) for v in stages.values())


def report(root: Path) -> list[str]:
    lines = []
    remote = default_remote(root)
    missing = missing_remote_folder(root)
    if remote is None:
        lines.append("DVC remote: none set (.dvc/config core.remote); `dvc pull` and the pipeline's push need one")
    elif missing:
        lines.append(f"DVC remote '{missing[0]}': {missing[1]} does not exist on this machine: `dvc pull` fails "
                     "(\"Is your cache up to date?\") and outputs this clone lacks can only be made again or "
                     f"restored from elsewhere (`dvc remote modify --local {missing[0]} url PATH_OR_URL` where a run "
                     "pushed them)")
    else:
        lines.append(f"DVC remote '{remote[0]}': {remote[1]}")
    restorable = archive_restorable(root)
    lines.append(f"archive/: {len(restorable)} per-problem results of dvc.lock missing here"
                 + (" -> `python -m orchestration.archive pull` restores them (then `dvc repro -s report` reruns "
                    "the report alone)" if restorable else ""))
    counts = dvc_status(root)
    if counts is None:
        lines.append("dvc status: could not be read (run `dvc status` for DVC's message)")
    elif counts[0] == 0:
        lines.append("dvc status: data and pipelines are up to date")
    else:
        lines.append(f"dvc status: {counts[0]} stages changed, {counts[1]} of them only because their files are "
                     "missing in this workspace (pull them, or restore them from archive/, instead of rerunning)")
    return lines


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print("\n".join(report(ROOT)))


if __name__ == "__main__":
    main()
