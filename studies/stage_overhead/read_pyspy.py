"""Where the stage processes of a run spend their CPU: a `py-spy record --subprocesses --format raw` profile, read.

    py-spy record --subprocesses --idle -r 20 --format raw -o run.raw -- \\
        bash scripts/run.sh python -m pytest -q -n 0 tests/pipeline/test_pipeline_models.py
    python -m studies.stage_overhead.read_pyspy run.raw [--rate 20]

Per process: the seconds its threads were on the CPU (samples whose innermost frame is not a wait: a thread blocked
in a queue, a lock, a select or a sleep is left out), and how much of it was spent importing (inside
importlib's `_find_and_load`). Then the imports of the stage processes (`python -m flows.*`), by the top-level
package that project code imported. py-spy is not among the pins: `pip install --target DIR py-spy`.
"""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

# Innermost frames that mean "waiting", whatever the class: queue workers, locks, selectors, sleeps, pipes.
WAITS = {"wait", "_worker", "_connection_worker_thread", "select", "_try_wait", "heartbeat_loop", "wait_until_serving",
         "_wait_for_tstate_lock", "read", "sleep", "recv_into", "accept", "poll", "readline", "acquire", "get",
         "_run_once", "run_forever", "join", "communicate", "_communicate", "readinto", "recv"}
PROJECT = ("flows/", "mwpgen/", "tasks/", "tracking/", "orchestration/", "<frozen runpy>")


def read(path: Path):
    for line in path.open():
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        procs = [f for f in frames if f.startswith("process ")]
        quoted = re.search(r'"(.*)"', procs[-1]) if procs else None  # a command line py-spy could not read: none
        name = quoted.group(1) if quoted else (procs[-1] if procs else "?")
        code = [f for f in frames if not f.startswith("process ")]
        if code and code[-1].split(" (")[0].split(".")[-1] not in WAITS:
            yield re.sub(r" --single-item.*", "", name)[:90], code, int(count)


def imported_package(code: list[str]) -> str:
    """The first package outside the project whose module body is on the stack ("(project)" if none)."""
    for frame in code:
        if frame.startswith("<module> ("):
            where = frame[len("<module> ("):].rsplit(":", 1)[0]
            if not where.startswith(PROJECT):
                return where.split("/")[0]
    return "(project)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path)
    parser.add_argument("--rate", type=float, default=20.0, help="py-spy's -r (samples a second)")
    args = parser.parse_args()
    on_cpu, importing = collections.Counter(), collections.Counter()
    stage_imports = collections.Counter()
    for name, code, count in read(args.raw):
        on_cpu[name] += count
        if any("_find_and_load" in f for f in code):
            importing[name] += count
            if "flows." in name:
                stage_imports[imported_package(code)] += count
    s = args.rate
    print(f"on the CPU: {sum(on_cpu.values()) / s:.1f} s in all")
    for name, count in on_cpu.most_common():
        print(f"  {count / s:7.1f} s  (importing {importing[name] / s:5.1f})  {name}")
    print(f"imports in the stage processes: {sum(stage_imports.values()) / s:.1f} s, by package")
    for package, count in stage_imports.most_common(8):
        print(f"  {count / s:7.1f} s  {package}")


if __name__ == "__main__":
    main()
