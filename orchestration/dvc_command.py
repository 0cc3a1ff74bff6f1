"""`python orchestration/dvc_command.py ARGS`: DVC's own command line (`dvc ARGS`, run in this process) that ends
with the pipeline that started it, however the pipeline ends.

The pipeline starts it in a process group of its own and asks the kernel to send it SIGTERM when the pipeline dies
(Linux's PR_SET_PDEATHSIG: also after a SIGKILL or the out-of-memory killer; `start`). SIGTERM here interrupts the
whole group as a Ctrl-C at a terminal interrupts `dvc repro`: DVC ignores SIGINT while a stage's command runs and
waits for it; the stage (a Prefect flow) stops and saves what it has (a training its checkpoint); DVC writes no
dvc.lock entry for a stage that did not succeed, and stages nothing. What still runs GRACE_S later is killed.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
from pathlib import Path

GRACE_S = 30.0  # a stage interrupted saves what it has (a checkpoint) before it is killed


def _interrupt_group(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgrp()
    killer = threading.Timer(GRACE_S, os.killpg, (group, signal.SIGKILL))
    killer.daemon = True  # DVC exits as soon as its stage has stopped; the timer must not keep it
    killer.start()
    os.killpg(group, signal.SIGINT)


def _child_setup(parent: int) -> None:  # pragma: no cover - runs in the child between fork and exec
    """SIGINT at its default (a pipeline started in the background hands it on ignored: DVC's stage could then not be
    interrupted) and SIGTERM from the kernel when the parent dies."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def start(args: list[str], *, cwd: Path, env: dict, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """`dvc ARGS` in `cwd`, its output (stdout and stderr together) on the returned process's stdout, one line at a
    time. Start it from the thread that lives as long as the run (the kernel's signal follows the starting thread)."""
    parent = os.getpid()
    # run as a script: it needs no import path into this project, whatever `cwd` is
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, start_new_session=True, pass_fds=pass_fds,
                            preexec_fn=lambda: _child_setup(parent))


def main() -> None:
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)  # this folder's modules must not shadow any DVC imports
    signal.signal(signal.SIGTERM, _interrupt_group)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["dvc", *sys.argv[1:]]
    runpy.run_module("dvc", run_name="__main__", alter_sys=True)  # exactly `python -m dvc ARGS`


if __name__ == "__main__":
    main()
