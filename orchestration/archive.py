"""Keep the per-problem results in git, so that a new machine can rerun the report without retraining.

The generated problems, the evaluator's predictions and the judge's verdicts are DVC outputs: cached on the machine
that made them and pushed to the DVC remote. Where that remote is a folder on the same machine (the default), a fresh
clone on another machine has none of them, and the report stage, which pairs every model's predictions, cannot run
until every model is trained again (hours). They are small (about 0.25 MB per model and fold), so `push` copies the
ones this workspace holds into `archive/`, a folder of this repository that git carries, under their dvc.lock md5
(DVC's own cache layout, files/md5/ab/cdef...), and `pull` puts every one the archive holds back in the workspace and
the DVC cache, where DVC finds them as if the stage had run here (also over another run's copy that an earlier pull
left, so the report never pairs a new score with an old generation):

    python -m orchestration.archive push     # after a run; then commit archive/ with the dvc.lock that names them
    python -m orchestration.archive pull     # on a fresh clone; then `dvc repro -s report` (-s: the report alone)

Only dvc.lock's outputs under ARCHIVED are archived (with the keywords, which the report reads for Table 5: 3.7 MB
for Math23K's fold); models stay in the DVC remote. It reads dvc.lock alone, so it
also keeps the outputs of stages the current params.yaml does not list (Table 4's variants, the other datasets).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
from pathlib import Path

import yaml

from mwpgen.paths import PROJECT_ROOT

ARCHIVED = ("results/generations/", "results/predictions/", "results/judge/", "data/keywords/")


def archived_outputs(root: Path) -> dict[str, str]:
    """path -> md5 of dvc.lock's cached outputs under ARCHIVED (a metric such as results/scores is in git already)."""
    lock = yaml.safe_load((root / "dvc.lock").read_text(encoding="utf-8")) or {}
    return {out["path"]: out["md5"] for stage in (lock.get("stages") or {}).values() for out in stage.get("outs", [])
            if out["path"].startswith(ARCHIVED) and "md5" in out}


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _stored(store: Path, md5: str) -> Path:
    return store / "files" / "md5" / md5[:2] / md5[2:]


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    shutil.copyfile(src, part)
    part.replace(dest)


def push(root: Path = PROJECT_ROOT) -> list[str]:
    """Copy into archive/ each archived output whose workspace file is the one dvc.lock names; returns their paths.
    A workspace file that differs from its lock entry (edited, or from another run) is left out and named."""
    pushed = []
    for path, md5 in sorted(archived_outputs(root).items()):
        file = root / path
        if not file.exists():
            continue
        if _md5(file) != md5:
            print(f"{path}: not the file dvc.lock names (md5 {md5}); not archived")
            continue
        stored = _stored(root / "archive", md5)
        if not stored.exists():
            _copy(file, stored)
        pushed.append(path)
    return pushed


def pull(root: Path = PROJECT_ROOT) -> list[str]:
    """Put each archived output that archive/ holds into the workspace and the DVC cache where the workspace lacks it
    or holds another run's copy; returns their paths. A workspace file that differs from its lock entry is replaced
    only when its own bytes are kept (in archive/ or the DVC cache, under their md5): another run's output left by a
    pull before a newer dvc.lock came in. One that is kept nowhere (an edit) stops the pull before anything is
    written, naming every such file."""
    wanted = {}
    unkept = []
    for path, md5 in sorted(archived_outputs(root).items()):
        file, stored = root / path, _stored(root / "archive", md5)
        if not stored.exists():
            continue
        if file.exists():
            own = _md5(file)
            if own == md5:
                continue
            if not (_stored(root / "archive", own).exists() or _stored(root / ".dvc" / "cache", own).exists()):
                unkept.append(f"{path} (md5 {own}; dvc.lock names {md5})")
                continue
        wanted[path] = (md5, stored)
    if unkept:
        raise SystemExit("archive pull: these workspace files differ from dvc.lock and are kept in neither archive/ "
                         "nor the DVC cache, so replacing them would lose them; move them aside and pull again:\n  "
                         + "\n  ".join(unkept))
    for path, (md5, stored) in wanted.items():
        _copy(stored, _stored(root / ".dvc" / "cache", md5))
        _copy(stored, root / path)
    return list(wanted)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("command", choices=("push", "pull"))
    args = cli.parse_args()
    paths = push() if args.command == "push" else pull()
    print(f"{args.command}: {len(paths)} outputs of dvc.lock under {', '.join(ARCHIVED)}")
    for path in paths:
        print(f"  {path}")


if __name__ == "__main__":
    main()
