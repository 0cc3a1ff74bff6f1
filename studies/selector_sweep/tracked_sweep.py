"""Choose the context selector's settings, and check that a setting holds on every seed
(`studies.selector_sweep.selector_sweep` says what a run trains and what "holds" means), as a Prefect flow tracked in
MLflow: one run per (setting, seed) under a parent run `sweep_selector`. The table goes to
studies/selector_sweep/selector_sweep_<grid>.md (and .json). Not a DVC stage: it informs the defaults of `train.ours`.

    python -m studies.selector_sweep.tracked_sweep --dataset arithmetic --fold 0 --steps 40 --grid seeds
"""

from __future__ import annotations

import argparse

from prefect import flow, get_run_logger

from flows.common import PROJECT_ROOT, params_or_exit, run_stage
from mwpgen.config.schema import Params
from mwpgen.device import resolve_device
from studies.selector_sweep.selector_sweep import add_arguments, machine_name, sweep
from tracking.runs import stage_run

OUT = PROJECT_ROOT / "studies" / "selector_sweep" / "selector_sweep"  # + _<grid>.md, .json


@flow(name="sweep_selector")
def sweep_selector(params: Params, dataset: str, fold: int, steps: int, max_train: int, grid: str,
                   seeds: list[int]) -> dict:
    log = get_run_logger()
    device = resolve_device(params.train.device)
    out = OUT.with_name(f"{OUT.name}_{grid}")
    with stage_run("sweep_selector", tags={"dataset": dataset, "fold": str(fold)}) as parent:
        parent.params({"dataset": dataset, "fold": fold, "steps": steps, "max_train": max_train,
                       "model": params.train.model, "grid": grid, "seeds": " ".join(map(str, seeds))})

        def on_row(setting: dict, row: dict) -> None:
            v, t = row["validation"], row["test"]
            log.info("%s seed %d: val loss %.4f, median %s words, none %.1f%% (test %.1f%%)", row["setting"],
                     row["seed"], row["val_loss"], v["words_median"], 100 * v["none_share"], 100 * t["none_share"])
            with stage_run(f"selector {row['setting']} seed={row['seed']}", parent.run_id) as run:
                run.params(setting | {"seed": row["seed"], "steps": steps})
                run.metrics({"val_loss": row["val_loss"], **{f"{name}_{k}": v for name in ("validation", "test")
                                                             for k, v in row[name].items()}})

        report = sweep(params, dataset, fold, steps, max_train, grid, seeds, device, out,
                       machine_name(device, params.train.mixed_precision), on_row=on_row)
        parent.artifact(out.with_suffix(".md"))
        parent.artifact(out.with_suffix(".json"))
    log.info("chosen: %s", report["chosen"])
    return report


if __name__ == "__main__":
    cli = add_arguments(argparse.ArgumentParser(description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))
    args = cli.parse_args()
    run_stage(sweep_selector, params_or_exit(args.params), args.dataset, args.fold, args.steps, args.max_train,
              args.grid, args.seeds)
