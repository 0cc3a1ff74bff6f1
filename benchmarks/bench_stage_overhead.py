"""The fixed cost of one pipeline stage: a stage process that does no work, run alone (Prefect starts and stops a
temporary server inside it, as `python -m flows.<stage>` does by itself) and with a shared Prefect API in its
environment (as every stage of `python -m orchestration.pipeline` runs), each in a fresh Python, side by side,
interleaved; the shared API's wall time is printed as a ratio of the stage alone.

The stage is what every stage flow is made of -- `flows.common.run_stage` running a Prefect flow that opens, logs to
and closes one MLflow run (`tracking.runs.stage_run`) -- with nothing else in it, so what it measures is what each
stage pays before and after its own work: Python, importing Prefect, MLflow and the project, the flow run, the
MLflow run (sqlite store), and the exit. Each run is timed as a whole (spawn to exit) and split at stamps the stage
writes: imported, flow body entered, flow body done, flow returned.

    bash scripts/run.sh python -m benchmarks.bench_stage_overhead [--repeats 5] [--split] [--vs OTHER_CHECKOUT]

`--split` also times `python -m flows.split` (a real, cheap stage: ~3 s of work) both ways; it needs this
checkout's data/processed (the data stages run once). Stores (Prefect's database, MLflow's sqlite) are scratch
ones in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestration.prefect_api import API_ENV, prefect_server

ROOT = Path(__file__).resolve().parents[1]

# The noop stage is `python -m flows.noop_stage`, as a stage command reads, from a scratch `flows` package whose other
# modules are the project's (or --vs's: the first PYTHONPATH entry).
FLOWS_INIT = '''\
import os
__path__.append(os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[0], "flows"))
'''

NOOP_STAGE = '''\
import atexit, json, sys, time
from prefect import flow
from flows.common import run_stage
from tracking.runs import stage_run

stamps = {"imported": time.time()}
# Registered before Prefect's and MLflow's handlers, so it runs after them: whether run_stage returns (the
# interpreter's teardown follows) or ends the process once the handlers have run, the stamps are written.
atexit.register(lambda: json.dump(stamps, open(sys.argv[1], "w")))


@flow(name="noop-stage")
def noop_stage():
    stamps["flow_body"] = time.time()
    with stage_run("noop-stage") as run:
        run.params({"n": 1})
    stamps["flow_body_done"] = time.time()


def stage():
    noop_stage()
    stamps["flow_returned"] = time.time()


run_stage(stage)
'''

PHASES = [("python + imports", "start", "imported"), ("flow run start", "imported", "flow_body"),
          ("MLflow run (open, log, close)", "flow_body", "flow_body_done"),
          ("flow run end", "flow_body_done", "flow_returned"), ("exit", "flow_returned", "end")]


def cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                     platform.processor())
    except OSError:
        model = platform.processor()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return (f"{model}, {os.cpu_count()} CPUs, avx512_bf16 {'yes' if 'avx512_bf16' in flags else 'no'}, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def run_once(cmd: list[str], env: dict, stamps_file: Path | None, cwd: Path = ROOT) -> tuple[float, dict]:
    start = time.time()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    end = time.time()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    if "Starting temporary server" in proc.stdout + proc.stderr and API_ENV in env:
        sys.exit(f"{' '.join(cmd)} started a temporary server although {API_ENV} was set")
    stamps = json.loads(stamps_file.read_text()) if stamps_file else {}
    return end - start, {"start": start, **stamps, "end": end}


def summary(xs: list[float]) -> str:
    return f"min {min(xs):6.2f}  median {statistics.median(xs):6.2f}  max {max(xs):6.2f}"


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--split", action="store_true", help="also time `python -m flows.split` (needs data/processed)")
    cli.add_argument("--vs", type=Path, help="another checkout: its noop stage also runs with the shared API, "
                     "interleaved (e.g. the code before a change)")
    args = cli.parse_args()
    if args.split and not (ROOT / "data" / "processed" / "arithmetic.jsonl").exists():
        sys.exit("--split needs data/processed: run the data stages first (python -m orchestration.pipeline split)")

    with tempfile.TemporaryDirectory(prefix="stage-overhead-") as tmp:
        tmp = Path(tmp)
        (tmp / "flows").mkdir()
        (tmp / "flows" / "__init__.py").write_text(FLOWS_INIT)
        (tmp / "flows" / "noop_stage.py").write_text(NOOP_STAGE)
        base = {k: v for k, v in os.environ.items() if k != API_ENV}
        base.update({"PREFECT_HOME": str(tmp / "prefect"), "MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlflow.db'}",
                     "PYTHONPATH": str(ROOT), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
        base.pop("MWPGEN_PARENT_RUN_ID", None)
        print(f"CPU: {cpu()}")
        t = time.time()
        with prefect_server(tmp / "prefect", ui=False, env=base) as url:
            print(f"shared Prefect server ({url}) up in {time.time() - t:.1f} s (a fresh database: migrations "
                  "included; paid once per pipeline run)")
            shared = {**base, API_ENV: url}
            cases = [("noop stage", ["-m", "flows.noop_stage", str(tmp / "stamps.json")], tmp, True)]
            if args.split:
                cases.append(("python -m flows.split", ["-m", "flows.split"], ROOT, False))
            for name, args_, cwd, stamped in cases:
                envs = {"alone (own temporary server)": base, "shared API (PREFECT_API_URL)": shared}
                if args.vs and stamped:
                    envs[f"shared API, code of {args.vs}"] = {**shared, "PYTHONPATH": str(args.vs.resolve())}
                for env in envs.values():  # warm the caches and the stores
                    run_once([sys.executable, *args_], env, tmp / "stamps.json" if stamped else None, cwd)
                walls = {mode: [] for mode in envs}
                phases = {mode: {p: [] for p, _, _ in PHASES} for mode in walls}
                for _ in range(args.repeats):  # interleaved: drift in the machine's load hits every mode alike
                    for mode, env in envs.items():
                        wall, stamps = run_once([sys.executable, *args_], env,
                                                tmp / "stamps.json" if stamped else None, cwd)
                        walls[mode].append(wall)
                        if stamped:
                            for p, a, b in PHASES:
                                phases[mode][p].append(stamps[b] - stamps[a])
                print(f"\n{name}: wall seconds per stage process, {args.repeats} runs each")
                alone = statistics.median(walls["alone (own temporary server)"])
                for mode, xs in walls.items():
                    print(f"  {mode:32s} {summary(xs)}  (x{statistics.median(xs) / alone:.2f} of alone)")
                if stamped:
                    for mode in walls:
                        print(f"  where the time goes, {mode} (median s):")
                        for p, _, _ in PHASES:
                            print(f"    {p:32s} {statistics.median(phases[mode][p]):6.2f}")

if __name__ == "__main__":
    main()
