"""The whole pipeline: `dvc repro` under one parent MLflow run, so every stage run is its child.

DVC decides which stages are stale; each stage it runs is a Prefect flow of its own (`python -m flows.<stage>`)
that finds the parent run id in MWPGEN_PARENT_RUN_ID. This is also the flow that `prefect.yaml` deploys.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from prefect import flow, get_run_logger

from flows.common import PROJECT_ROOT, params_or_exit
from mwpgen.config import ParamsError, apply_profile
from tasks.tracking import PARENT_ENV, stage_run


@flow(name="pipeline")
def pipeline(targets: list[str] | None = None, force: bool = False, params_file: str = "params.yaml") -> None:
    log = get_run_logger()
    params = params_or_exit(str(PROJECT_ROOT / params_file))  # refuse bad params before any stage starts
    cmd = ["dvc", "repro", *(["--force"] if force else []), *(targets or [])]
    with stage_run("pipeline", tags={"dvc.targets": " ".join(targets or ["all"])}) as run:
        run.params(params.model_dump())
        env = {**os.environ, PARENT_ENV: run.run_id}
        log.info("running %s (parent MLflow run %s)", " ".join(cmd), run.run_id)
        start = time.time()
        proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env)
        run.metrics({"wall_s": time.time() - start})
        for path in ("dvc.lock", "params.yaml"):
            run.artifact(PROJECT_ROOT / path)
        if proc.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` exited with {proc.returncode}; see the stage output above")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("targets", nargs="*", help="DVC stages to reproduce (default: all)")
    parser.add_argument("--force", action="store_true", help="rerun stages even if DVC finds them up to date")
    parser.add_argument("--profile", help="apply profiles/<NAME>.yaml to params.yaml first (e.g. paper)")
    args = parser.parse_args()
    if args.profile:
        try:
            changed = apply_profile(PROJECT_ROOT / "params.yaml", PROJECT_ROOT / "profiles" / f"{args.profile}.yaml")
        except ParamsError as e:
            sys.exit(f"error: {e}")
        print(f"profile {args.profile}: set " + (", ".join(changed) or "nothing (already applied)"))
    try:
        pipeline(targets=args.targets or None, force=args.force)
    except RuntimeError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
