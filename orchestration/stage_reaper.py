"""Nothing left running: the stages of a pipeline run end with it, however it ends.

Each stage runs in a process group of its own (`dvc repro` and the stage command it starts), so that an interruption
reaches both while the Prefect server they report to still answers. A process group outlives the process that made
it: a pipeline killed by SIGKILL, or by the out-of-memory killer, would leave its stage running and holding DVC's
locks on the stage's deps and outs. The reaper is a small process of its own session that the pipeline writes each
running group to; when its input closes (the pipeline exited, however), it interrupts every group still listed as a
Ctrl-C does, waits for it and kills what remains.

The groups it watches are also written to `.dvc/tmp/running-stages.json`, so a pipeline started while a stage of an
earlier one is still stopping names it by pid instead of meeting DVC's "is busy" error (`leftover_stages`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 30.0  # a stage interrupted saves what it has (a checkpoint) before it is killed


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def reap(lines) -> None:
    """The reaper's loop: `start <pgid> <stage>` / `end <pgid>` lines until its input closes, then every group still
    listed is interrupted, given GRACE_S to stop and killed."""
    groups: dict[int, str] = {}
    for line in lines:
        verb, pgid, *stage = line.split()
        if verb == "start":
            groups[int(pgid)] = " ".join(stage)
        else:
            groups.pop(int(pgid), None)
    live = [g for g in groups if group_alive(g)]
    for g in live:
        print(f"pipeline gone: interrupting stage {groups[g]} (process group {g})", file=sys.stderr, flush=True)
        os.killpg(g, signal.SIGINT)
    deadline = time.time() + GRACE_S
    while time.time() < deadline and any(group_alive(g) for g in live):
        time.sleep(0.2)
    for g in live:
        if group_alive(g):
            os.killpg(g, signal.SIGKILL)


def running_file(root: Path) -> Path:
    return root / ".dvc" / "tmp" / "running-stages.json"


class StageReaper:
    """Started before the first stage; `started` / `ended` for every stage's process group; `close` at the end."""

    def __init__(self, root: Path):
        self.file = running_file(root)
        self.groups: dict[int, str] = {}
        self.process = subprocess.Popen([sys.executable, "-m", "orchestration.stage_reaper"], stdin=subprocess.PIPE,
                                        text=True, start_new_session=True, cwd=Path(__file__).resolve().parents[1])

    def _tell(self, verb: str, pgid: int, stage: str = "") -> None:
        self.process.stdin.write(f"{verb} {pgid} {stage}\n")
        self.process.stdin.flush()
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps({str(g): s for g, s in self.groups.items()}))

    def started(self, pgid: int, stage: str) -> None:
        self.groups[pgid] = stage
        self._tell("start", pgid, stage)

    def ended(self, pgid: int) -> None:
        self.groups.pop(pgid, None)
        self._tell("end", pgid)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()
        if not self.groups:
            self.file.unlink(missing_ok=True)


def leftover_stages(root: Path) -> dict[int, str]:
    """Process groups of an earlier run's stages that are still alive: {pgid: stage}."""
    try:
        listed = json.loads(running_file(root).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {int(pgid): stage for pgid, stage in listed.items() if pgid.isdigit() and group_alive(int(pgid))}


def wait_for_leftovers(root: Path, timeout_s: float = GRACE_S + 5) -> dict[int, str]:
    """An earlier run's stages still stopping (its reaper gives each GRACE_S): wait for them; what is left after."""
    deadline = time.time() + timeout_s
    while (left := leftover_stages(root)) and time.time() < deadline:
        time.sleep(0.5)
    return left


def describe(leftovers: dict[int, str]) -> str:
    return "; ".join(f"{stage} (pid {pgid}; stop it with: kill -INT -{pgid})" for pgid, stage in leftovers.items())


if __name__ == "__main__":
    reap(sys.stdin)
