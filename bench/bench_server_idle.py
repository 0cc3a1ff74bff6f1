"""Idle CPU of the shared Prefect server: default services vs only the ones a pipeline run needs.

    bash scripts/run.sh python bench/bench_server_idle.py default trimmed      (docs/stage_overhead.md)
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from orchestration.prefect_api import prefect_server

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().split()
    return (int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")

OFF = ["SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS", "REPOSSESSOR",
       "CLEANUP_RECONCILER", "DB_VACUUM", "TRIGGERS"]
for arm in sys.argv[1:]:
    env = dict(os.environ)
    if arm == "trimmed":
        env.update({f"PREFECT_SERVER_SERVICES_{s}_ENABLED": "false" for s in OFF})
    home = Path(tempfile.mkdtemp())
    t0 = time.monotonic()
    with prefect_server(home, env=env) as url:
        up = time.monotonic() - t0
        pids = subprocess.run(["pgrep", "-f", f"PREFECT_HOME={home}|prefect server start"], capture_output=True, text=True).stdout.split()
        pids = [p for p in pids if os.path.exists(f"/proc/{p}") and str(home) in open(f"/proc/{p}/environ", errors="replace").read()]
        a = sum(cpu_s(p) for p in pids); time.sleep(60); b = sum(cpu_s(p) for p in pids)
        print(f"{arm}: up in {up:.1f} s; idle CPU {b - a:.2f} s over 60 s ({100 * (b - a) / 60:.1f} % of a core); pids {pids}", flush=True)
