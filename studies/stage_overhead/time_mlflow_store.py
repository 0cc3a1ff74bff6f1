"""What one stage's MLflow run costs against each tracking URI given: import the client, open the store, create a
run, log a param, end it; each URI in a fresh Python, alternating, `--rounds` times.

    # with MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false: 2 processes
    mlflow server --backend-store-uri sqlite:////tmp/srv.db --port 5123 &
    python -m studies.stage_overhead.time_mlflow_store http://127.0.0.1:5123 sqlite:////tmp/file.db --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ONE_RUN = """
import json, sys, time
t0 = time.perf_counter()
from mlflow.tracking import MlflowClient
t1 = time.perf_counter()
c = MlflowClient(sys.argv[1])
e = c.get_experiment_by_name("store-timing")
eid = e.experiment_id if e else c.create_experiment("store-timing")
r = c.create_run(eid)
c.log_param(r.info.run_id, "a", "1")
c.set_terminated(r.info.run_id)
print(json.dumps({"import_s": t1 - t0, "run_s": time.perf_counter() - t1}))
"""


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("uris", nargs="+", help="tracking URIs (an http:// server must already be running)")
    cli.add_argument("--rounds", type=int, default=3)
    args = cli.parse_args()
    env = {**os.environ, "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
    times: dict[str, list[dict]] = {u: [] for u in args.uris}
    for _ in range(args.rounds):
        for uri in args.uris:
            out = subprocess.run([sys.executable, "-c", ONE_RUN, uri], env=env, check=True, capture_output=True,
                                 text=True).stdout
            times[uri].append(json.loads(out.strip().splitlines()[-1]))
    for uri, rows in times.items():
        imports = sorted(r["import_s"] for r in rows)
        runs = sorted(r["run_s"] for r in rows)
        print(f"{uri}: import {imports[0]:.2f}-{imports[-1]:.2f} s, run {runs[0]:.2f}-{runs[-1]:.2f} s")


if __name__ == "__main__":
    main()
