"""Idle CPU of the shared Prefect server: Prefect's default services vs only the ones a pipeline run needs.

    bash scripts/run.sh python -m studies.speed.bench_server_idle default trimmed   (studies/stage_overhead/README.md)

Each arm starts a server (orchestration.prefect_api.prefect_server) in a fresh PREFECT_HOME, leaves it idle for
IDLE_S seconds and reports the CPU time its process used meanwhile.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

from orchestration.prefect_api import prefect_server

IDLE_S = 60
# What a temporary server for one pipeline run never uses; the task-run recorder and event persister stay on (they
# record the stages' task runs).
UNNEEDED = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS", "REPOSSESSOR",
            "CLEANUP_RECONCILER", "DB_VACUUM", "TRIGGERS")


def cpu_seconds(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def measure(arm: str) -> str:
    env = dict(os.environ)
    if arm == "trimmed":
        env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in UNNEEDED})
    start = time.monotonic()
    with prefect_server(Path(tempfile.mkdtemp()), env=env) as api_url:
        up_s = time.monotonic() - start
        port = urlparse(api_url).port  # a free port chosen for this server alone: it names the process
        pids = subprocess.run(["pgrep", "-f", f"prefect server start .*--port {port}"], capture_output=True,
                              text=True, check=False).stdout.split()
        if not pids:
            raise SystemExit(f"no process of the server on port {port} found (pgrep)")
        before = sum(cpu_seconds(pid) for pid in pids)
        time.sleep(IDLE_S)
        used = sum(cpu_seconds(pid) for pid in pids) - before
    return (f"{arm}: up in {up_s:.1f} s; idle CPU {used:.2f} s over {IDLE_S} s ({100 * used / IDLE_S:.1f} % of a "
            f"core); server pids {pids}")


if __name__ == "__main__":
    for arm in sys.argv[1:] or ["default", "trimmed"]:
        print(measure(arm), flush=True)
