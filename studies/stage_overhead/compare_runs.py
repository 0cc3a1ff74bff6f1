"""Whether two runs of the pipeline in two clones produced the same outputs: every output dvc.lock records, by hash,
and, for the JSON files among those that differ, the keys whose values differ (so a difference in a wall time can be
told from one in a result).

    bash scripts/run.sh python -m studies.stage_overhead.compare_runs /tmp/cold_clone /tmp/warm_clone

Used to check that stages forked from the warm Python (orchestration/warm_python.py) write what stages in a Python of
their own write: compare a warm and a cold run, and two cold runs, and read the differences side by side.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def outputs(clone: Path) -> dict[tuple[str, str], str]:
    """(stage, output path) -> md5, as the clone's dvc.lock records them."""
    stages = yaml.safe_load((clone / "dvc.lock").read_text())["stages"]
    return {
        (stage, out["path"]): out.get("md5", "") for stage, entry in stages.items() for out in entry.get("outs", [])
    }


def leaves(value, prefix: str = ""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{prefix}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def json_differences(a: Path, b: Path) -> dict[str, list[str]]:
    """File (relative) -> the keys whose values differ, for the JSON files under `a` (a file or a folder)."""
    files = [a] if a.is_file() else sorted(a.rglob("*.json"))
    found = {}
    for f in files:
        g = b / f.relative_to(a) if a.is_dir() else b
        if f.suffix != ".json" or not g.exists():
            continue
        x, y = dict(leaves(json.loads(f.read_text()))), dict(leaves(json.loads(g.read_text())))
        keys = sorted(k for k in x.keys() | y.keys() if x.get(k) != y.get(k))
        if keys:
            found[str(f)] = keys
    return found


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("a", type=Path)
    cli.add_argument("b", type=Path)
    args = cli.parse_args()
    a, b = outputs(args.a), outputs(args.b)
    common = sorted(a.keys() & b.keys())
    differ = [k for k in common if a[k] != b[k]]
    print(f"{len(common)} outputs in both runs, {len(common) - len(differ)} identical, {len(differ)} differ")
    for stage, path in differ:
        print(f"  {stage}: {path}")
        for f, keys in json_differences(args.a / path, args.b / path).items():
            print(f"    {Path(f).relative_to(args.a)}: {', '.join(keys)}")
    only = sorted(a.keys() ^ b.keys())
    if only:
        print(f"{len(only)} outputs in one run only: {', '.join(f'{s}: {p}' for s, p in only)}")


if __name__ == "__main__":
    main()
