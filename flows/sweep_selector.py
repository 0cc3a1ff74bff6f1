"""Choose the context selector's settings: phase 1 of ours (selector + generator, L_LM + beta L_c) for each
setting of a grid, scored on the fold's validation slice by the generator's loss with the context the selector
picks and by the selection statistics (words per problem, problems with none), before and after training.

    python -m flows.sweep_selector --dataset arithmetic --fold 0 --steps 60

One MLflow run per setting under a parent run `sweep_selector`; the table goes to docs/selector_sweep.md (and
.json). Not a DVC stage: it informs the defaults of `train.ours`, it does not feed the report.
"""

from __future__ import annotations

import argparse
import json

from prefect import flow, get_run_logger

from flows.common import DATA, PROJECT_ROOT, params_or_exit, run_stage
from mwpgen.config.schema import OursTrainParams, Params
from mwpgen.data.folds import load_fold
from mwpgen.io import atomic_write_text, write_json
from mwpgen.ours.build import build_models
from mwpgen.ours.selection import context_lm_loss, selection_stats
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.training import train_joint
from mwpgen.runtime import resolve_device
from tracking.runs import stage_run

# (selector form, selector learning rate (0 = the generator's), beta, rho): the paper's Eq. 5 first.
GRID = [("eq5", 0.0, 1.0, 0.1), ("eq5", 1e-2, 1.0, 0.1), ("residual", 1e-2, 1.0, 0.1),
        ("residual", 1e-2, 0.1, 0.1), ("residual", 1e-2, 1.0, 0.3), ("residual", 1e-2, 0.1, 0.3)]
OUT = PROJECT_ROOT / "docs" / "selector_sweep"


def _markdown(rows: list[dict], header: str) -> str:
    lines = [header, "", "| selector | selector lr | beta | rho | val loss | words/problem (median, mean) | "
             "problems with none | q range | at init: median, none |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, b = r["after"], r["before"]
        lines.append(f"| {r['selector']} | {r['selector_lr'] or 'lr'} | {r['beta']} | {r['rho']} | "
                     f"{r['val_loss']:.4f} | {a['words_median']:g}, {a['words_mean']:.2f} | {a['none_share']:.1%} | "
                     f"{a['q_min']:.3f}-{a['q_max']:.3f} | {b['words_median']:g}, {b['none_share']:.1%} |")
    return "\n".join(lines) + "\n"


@flow(name="sweep_selector")
def sweep_selector(params: Params, dataset: str, fold: int, steps: int, max_train: int) -> list[dict]:
    log = get_run_logger()
    exp, base = params.experiment, params.train.ours
    data = load_fold(DATA, dataset, fold, max_train, 0, exp.seed, validation_size=exp.validation_size)
    if not data.validation:
        raise ValueError("the sweep scores on the validation slice: set experiment.validation_size > 0")
    train = [JointExample(r["equation"], r["text"]) for r in data.train]
    val = [JointExample(r["equation"], r["text"]) for r in data.validation]
    device = resolve_device(params.train.device)
    rows = []
    with stage_run("sweep_selector", tags={"dataset": dataset, "fold": str(fold)}) as parent:
        parent.params({"dataset": dataset, "fold": fold, "steps": steps, "n_train": len(train), "n_val": len(val),
                       "model": params.train.model})
        for form, selector_lr, beta, rho in GRID:
            # `steps` of phase 1 only: no phase 2, no co-trained mwp2eq.
            cfg = OursTrainParams.model_validate(base.model_dump() | {
                "selector": form, "selector_lr": selector_lr, "beta": beta, "rho": rho, "context": "selector",
                "equation_loss": False, "mwp2eq_in_phase1": False, "phase1": {"epochs": 100, "max_steps": steps},
                "phase2": {"epochs": 0, "max_steps": 0}})
            models = build_models(cfg, params.train.model, device=device, seed=exp.seed,
                                  mixed_precision=params.train.mixed_precision)
            before = selection_stats(models, val, cfg.threshold, cfg.max_problem_tokens)
            result = train_joint(models, train, cfg, seed=exp.seed, log_every=params.train.log_every)
            after = selection_stats(models, val, cfg.threshold, cfg.max_problem_tokens)
            row = {"selector": form, "selector_lr": selector_lr, "beta": beta, "rho": rho,
                   "val_loss": context_lm_loss(models, val, cfg.max_problem_tokens, cfg.threshold),
                   "train_s": round(result["wall_time_s"], 1),
                   "before": {k: v for k, v in before.items() if k != "picks"},
                   "after": {k: v for k, v in after.items() if k != "picks"},
                   "examples": [{"problem": ex.problem, "picked": p} for ex, p in zip(val[:5], after["picks"])]}
            rows.append(row)
            log.info("%s lr %s beta %s rho %s: val loss %.4f, median %s words, none %.1f%%", form, selector_lr, beta,
                     rho, row["val_loss"], after["words_median"], 100 * after["none_share"])
            with stage_run(f"selector {form} lr={selector_lr} beta={beta} rho={rho}", parent.run_id) as run:
                run.params({"selector": form, "selector_lr": selector_lr, "beta": beta, "rho": rho, "steps": steps})
                run.metrics({"val_loss": row["val_loss"], **{f"{k}_after": v for k, v in row["after"].items()},
                             **{f"{k}_before": v for k, v in row["before"].items()}})
        header = (f"### Selector sweep: phase 1, {steps} steps of {cfg.batch_size} on {dataset} fold {fold} "
                  f"({len(train)} training problems), scored on its {len(val)}-problem validation slice")
        write_json(OUT.with_suffix(".json"), rows)
        atomic_write_text(OUT.with_suffix(".md"), _markdown(rows, header))
        parent.artifact(OUT.with_suffix(".md"))
        parent.artifact(OUT.with_suffix(".json"))
    log.info("\n%s", json.dumps([{k: r[k] for k in ("selector", "selector_lr", "beta", "rho", "val_loss")}
                                 for r in rows], indent=1))
    return rows


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--params", default="params.yaml")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--steps", type=int, default=60, help="phase-1 steps per setting")
    cli.add_argument("--max-train", type=int, default=0, help="training problems drawn (0 = the whole fold)")
    args = cli.parse_args()
    run_stage(sweep_selector, params_or_exit(args.params), args.dataset, args.fold, args.steps, args.max_train)
