"""`python -m orchestration.worker --pool mwpgen-local [prefect worker start options]`: a Prefect worker that stops on
the first Ctrl-C (or SIGTERM), taking the runs it holds with it.

`prefect worker start` on a first SIGINT only stops taking new runs and waits for the ones it runs to finish (a whole
pipeline: hours); only a second one kills it, leaving its runs going without a worker. This starts it in a session of
its own and, on the first SIGINT or SIGTERM, interrupts each flow run it started (each runs in a process group of its
own) as a Ctrl-C would: a pipeline stops its stage (a training keeps its checkpoint) and its run ends Crashed; then
the worker, with nothing left to wait for, stops. A second signal kills the worker and its runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

RUNS_GRACE_S = 60.0  # a run interrupted stops its stage (a training saves its checkpoint) before the worker stops


def children(pid: int) -> list[int]:
    """The processes `pid` started and that still run (Linux's /proc)."""
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def _signal_run(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:  # a flow run in a group of its own: the whole group, its children too
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return subprocess.call([sys.executable, "-m", "prefect", "worker", "start", "--help"])
    worker = subprocess.Popen([sys.executable, "-m", "prefect", "worker", "start", *args], start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    signals = []

    def stop_worker_once_its_runs_ended() -> None:
        deadline = time.time() + RUNS_GRACE_S
        while children(worker.pid) and time.time() < deadline:  # each run ends and reports its state itself
            time.sleep(0.2)
        try:
            worker.send_signal(signal.SIGINT)  # the worker's own stop (a second: SIGKILL)
        except ProcessLookupError:
            pass

    def stop(signum, frame) -> None:
        signals.append(signum)
        first = len(signals) == 1
        if first:
            print("stopping the worker: interrupting its flow runs as by a Ctrl-C (again: kill them)",
                  file=sys.stderr, flush=True)
        for run in children(worker.pid):
            _signal_run(run, signal.SIGINT if first else signal.SIGKILL)
        if first:
            threading.Thread(target=stop_worker_once_its_runs_ended, daemon=True).start()
        else:
            worker.kill()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = worker.wait()
    return 128 + signals[0] if signals else code


if __name__ == "__main__":
    sys.exit(main())
