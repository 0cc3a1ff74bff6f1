"""What DVC spends per stage reading and writing dvc.lock, and what ruamel.yaml's C loader saves (issue 22).

    bash scripts/run.sh python bench/bench_dvc_lock.py --repeats 3
    bash scripts/run.sh python bench/bench_dvc_lock.py --repeats 3 --trimmed-for /tmp/smoke-clone
    bash scripts/run.sh python bench/bench_dvc_lock.py --repro /tmp/clone [--trimmed] -- -f -s download translate split

DVC reads and rewrites the whole dvc.lock around every stage it runs (dvc/utils/serialize/_yaml.py): "safe" loads to
collect and check stages, and a round-trip load plus a dump to record each stage's result. The committed lock
describes every committed run (some 10,000 lines), so a stage with nothing to do pays for all of them. ruamel.yaml
parses "safe" in C only when ruamel.yaml.clib is installed (ruamel.yaml 0.19 no longer pulls it in); the round trip
and the dump are pure Python either way.

Default mode: the project's dvc.lock parsed as DVC does, arms interleaved for `--repeats` rounds (median seconds):
safe load in pure Python, safe load in C, round-trip load, round-trip dump; with `--trimmed-for DIR`, also the
round-trip load and dump of the lock as orchestration/dvc_lock.py trims it for the stages DIR's dvc.yaml and
params.yaml define (e.g. a clone with the smoke profile applied). `--repro DIR -- ARGS`: runs `dvc repro ARGS` in DIR
in this process, counting DVC's YAML loads and dumps and the seconds they take (the stages run for real); with
`--trimmed`, inside `trimmed_lock` as `orchestration.pipeline` runs it.
"""

import argparse
import atexit
import collections
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_arms(text: str, repeats: int, trimmed: str | None = None) -> None:
    from dvc.utils.serialize._yaml import dumps_yaml, parse_yaml_for_update
    from ruamel.yaml import YAML

    arms = {
        "safe load, pure Python": lambda: YAML(typ="safe", pure=True).load(text),
        "safe load, C (ruamel.yaml.clib)": lambda: YAML(typ="safe").load(text),
        "round-trip load (DVC's update)": lambda: parse_yaml_for_update(text, "dvc.lock"),
    }
    dumps = {"round-trip dump": "round-trip load (DVC's update)"}
    if trimmed is not None:
        print(f"trimmed: {trimmed.count(chr(10))} lines")
        arms["round-trip load, trimmed"] = lambda: parse_yaml_for_update(trimmed, "dvc.lock")
        dumps["round-trip dump, trimmed"] = "round-trip load, trimmed"
    seconds: dict[str, list[float]] = {name: [] for name in [*arms, *dumps]}
    loaded: dict[str, object] = {}
    for _ in range(repeats):
        for name, load in arms.items():
            start = time.perf_counter()
            loaded[name] = load()
            seconds[name].append(time.perf_counter() - start)
        for name, source in dumps.items():
            start = time.perf_counter()
            dumps_yaml(loaded[source])
            seconds[name].append(time.perf_counter() - start)
    try:
        import _ruamel_yaml  # noqa: F401
        clib = "installed"
    except ImportError:
        clib = "NOT installed: the C arm fell back to pure Python"
    print(f"dvc.lock: {text.count(chr(10))} lines; ruamel.yaml.clib {clib}")
    print(f"seconds (median of {repeats}; every run)")
    for name, runs in seconds.items():
        print(f"  {name:34s} {statistics.median(runs):6.2f}   " + " ".join(f"{s:.2f}" for s in runs))
    same = loaded["safe load, pure Python"] == loaded["safe load, C (ruamel.yaml.clib)"]
    print("pure and C loads agree:", same)


def count_repro(directory: Path, dvc_args: list[str], trimmed: bool) -> int:
    import dvc.utils.serialize as serialize
    import dvc.utils.serialize._yaml as yaml_io

    calls: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])

    def counted(name: str, func):
        def wrapper(*args, **kwargs):
            key = name
            if name == "parse_yaml":
                typ = kwargs.get("typ", args[2] if len(args) > 2 else "safe")
                key = f"load ({typ}) {Path(str(args[1])).name}"
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                calls[key][0] += 1
                calls[key][1] += time.perf_counter() - start
        return wrapper

    yaml_io.parse_yaml = serialize.parse_yaml = counted("parse_yaml", yaml_io.parse_yaml)
    yaml_io._dump = counted("dump", yaml_io._dump)
    began = time.perf_counter()

    def report() -> None:
        total = time.perf_counter() - began
        print(f"dvc repro {' '.join(dvc_args)}: {total:.1f} s in all", file=sys.stderr)
        for key, (n, s) in sorted(calls.items()):
            print(f"  {key:26s} {n:3d} calls {s:7.2f} s", file=sys.stderr)

    atexit.register(report)
    os.chdir(directory)
    from dvc.cli import main

    if not trimmed:
        return main(["repro", *dvc_args])
    from orchestration.dvc_lock import trimmed_lock

    with trimmed_lock(directory.resolve()) as set_aside:
        print(f"dvc.lock: {set_aside} entries set aside", file=sys.stderr)
        return main(["repro", *dvc_args])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lock", type=Path, default=ROOT / "dvc.lock", help="the lock file to parse")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--repro", type=Path, metavar="DIR", help="count DVC's YAML work in `dvc repro` run in DIR")
    parser.add_argument("--trimmed", action="store_true", help="with --repro: inside orchestration's trimmed_lock")
    parser.add_argument("--trimmed-for", type=Path, metavar="DIR",
                        help="also time the lock trimmed to the stages DIR's dvc.yaml and params.yaml define")
    parser.add_argument("dvc_args", nargs="*", help="after --: the arguments of `dvc repro`")
    args = parser.parse_args()
    if args.repro:
        sys.exit(count_repro(args.repro, args.dvc_args, args.trimmed))
    text, trimmed = args.lock.read_text(), None
    if args.trimmed_for:
        from orchestration.dvc_lock import HEADER, split_entries, stage_names

        names = stage_names(args.trimmed_for)
        trimmed = HEADER + "".join(e for name, e in split_entries(text).items() if name in names)
    parse_arms(text, args.repeats, trimmed)


if __name__ == "__main__":
    main()
