"""Choose the context selector's settings, and check that a setting holds on every seed: phase 1 of ours
(selector + generator, L_LM + beta L_c) for each setting of a grid and each seed, scored on the fold's validation
slice by the generator's loss with the context the selector picks and by the selection statistics (words per
problem, problems with none). Test problems are only counted (words picked), never used to choose.

    python -m flows.sweep_selector --dataset arithmetic --fold 0 --steps 60 --grid seeds

A setting HOLDS when, on every seed, at most 5 % of the validation problems get no word and the median is 2-6
words; the chosen setting is the one of lowest mean validation loss among those that hold (none: no choice).
Each run trains phase 1 as train_ours does (train.ours with only the grid's switches changed, the selector's warm
start and keyword dropout included) but without the co-trained mwp2eq, which never touches the selector, cut at
`--steps` steps. One MLflow run per (setting, seed) under a parent run `sweep_selector`; the table goes to
docs/selector_sweep_<grid>.md (and .json). Not a DVC stage: it informs the defaults of `train.ours`.
"""

from __future__ import annotations

import argparse
import json
import statistics

from prefect import flow, get_run_logger

from flows.common import DATA, PROJECT_ROOT, fold_keywords, fold_paths, params_or_exit, run_stage
from mwpgen.config.schema import OursTrainParams, Params
from mwpgen.data.folds import load_fold
from mwpgen.io import atomic_write_text, write_json
from mwpgen.ours.build import build_models, warm_start_selector
from mwpgen.ours.selection import context_lm_loss, selection_stats
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.training import train_joint
from mwpgen.runtime import resolve_device
from tracking.runs import stage_run

# Each grid is a list of settings: the switches of train.ours that differ from params.yaml.
GRIDS = {
    # The earlier sweep (the paper's Eq. 5 first), all from the prior.
    "forms": [{"selector": "eq5", "selector_lr": 0.0, "beta": 1.0, "rho": 0.1, "selector_init": "prior"},
              {"selector": "eq5", "selector_lr": 1e-2, "beta": 1.0, "rho": 0.1, "selector_init": "prior"},
              {"selector": "residual", "selector_lr": 1e-2, "beta": 1.0, "rho": 0.1, "selector_init": "prior"},
              {"selector": "residual", "selector_lr": 1e-2, "beta": 0.1, "rho": 0.1, "selector_init": "prior"},
              {"selector": "residual", "selector_lr": 1e-2, "beta": 1.0, "rho": 0.3, "selector_init": "prior"},
              {"selector": "residual", "selector_lr": 1e-2, "beta": 0.1, "rho": 0.3, "selector_init": "prior"}],
    # The seed check of the start: from the prior (the paper) against the keyword warm start (the default).
    "seeds": [{"selector_init": "keywords"}, {"selector_init": "prior"}],
    # The seed check of params.yaml's train.ours alone.
    "default": [{}],
}
SEEDS = (2021, 7, 13, 1, 42)
NONE_AT_MOST, MEDIAN_WORDS = 0.05, (2, 6)
OUT = PROJECT_ROOT / "docs" / "selector_sweep"


def holds(stats: dict) -> bool:
    """A seed's selector selects: few problems without a word, a median count in range (the issue's target)."""
    return stats["none_share"] <= NONE_AT_MOST and MEDIAN_WORDS[0] <= stats["words_median"] <= MEDIAN_WORDS[1]


def _label(setting: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in setting.items()) or "params.yaml's train.ours"


def _markdown(rows: list[dict], chosen: str | None, header: str) -> str:
    lines = [header, "", "| setting | seed | val loss | validation: words (median, mean), none | test: words (median, "
             "mean), none | q range | selected share, first / last 10 steps | holds |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v, t = r["validation"], r["test"]
        lines.append(f"| {r['setting']} | {r['seed']} | {r['val_loss']:.4f} | {v['words_median']:g}, "
                     f"{v['words_mean']:.2f}, {v['none_share']:.1%} | {t['words_median']:g}, {t['words_mean']:.2f}, "
                     f"{t['none_share']:.1%} | {v['q_min']:.3f}-{v['q_max']:.3f} | {r['selected_first']:.2f} / "
                     f"{r['selected_last']:.2f} | {'yes' if r['holds'] else '**no**'} |")
    lines += ["", f"Chosen: {'none (no setting holds on every seed)' if chosen is None else chosen}."]
    return "\n".join(lines) + "\n"


@flow(name="sweep_selector")
def sweep_selector(params: Params, dataset: str, fold: int, steps: int, max_train: int, grid: str,
                   seeds: list[int]) -> dict:
    log = get_run_logger()
    exp, base = params.experiment, params.train.ours
    data = load_fold(DATA, dataset, fold, max_train, exp.max_test, exp.seed, validation_size=exp.validation_size)
    if not data.validation:
        raise ValueError("the sweep scores on the validation slice: set experiment.validation_size > 0")
    train = [JointExample(r["equation"], r["text"]) for r in data.train]
    val = [JointExample(r["equation"], r["text"]) for r in data.validation]
    test = [JointExample(r["equation"], r["text"]) for r in data.test]
    tfidf = fold_keywords(fold_paths("ours", dataset, fold), "tfidf", "train")
    device = resolve_device(params.train.device)
    rows = []
    with stage_run("sweep_selector", tags={"dataset": dataset, "fold": str(fold)}) as parent:
        parent.params({"dataset": dataset, "fold": fold, "steps": steps, "n_train": len(train), "n_val": len(val),
                       "model": params.train.model, "grid": grid, "seeds": " ".join(map(str, seeds))})
        for setting in GRIDS[grid]:
            # `steps` of phase 1 only: no phase 2, no co-trained mwp2eq.
            cfg = OursTrainParams.model_validate(base.model_dump() | setting | {
                "context": "selector", "equation_loss": False, "mwp2eq_in_phase1": False,
                "phase1": {"epochs": 100, "max_steps": steps}, "phase2": {"epochs": 0, "max_steps": 0}})
            for seed in seeds:
                models = build_models(cfg, params.train.model, device=device, seed=seed,
                                      mixed_precision=params.train.mixed_precision)
                if cfg.selector_init == "keywords":
                    warm_start_selector(models, cfg, train, [tfidf[r["id"]] for r in data.train])
                result = train_joint(models, train, cfg, seed=seed, log_every=params.train.log_every,
                                     validation=val, dropout=params.keywords.dropout)
                stats = {name: {k: v for k, v in selection_stats(models, xs, cfg.threshold, cfg.max_problem_tokens)
                                .items() if k != "picks"} for name, xs in (("validation", val), ("test", test))}
                shares = [h["selected_frac"] for h in result["history"]]
                row = {"setting": _label(setting), "seed": seed, **stats, "holds": holds(stats["validation"]),
                       "val_loss": context_lm_loss(models, val, cfg.max_problem_tokens, cfg.threshold,
                                                   cfg.context_tokens),
                       "selected_first": statistics.fmean(shares[:10]), "selected_last": statistics.fmean(shares[-10:]),
                       "best_step": result["best_steps"].get("selector"), "train_s": round(result["wall_time_s"], 1)}
                rows.append(row)
                log.info("%s seed %d: val loss %.4f, median %s words, none %.1f%% (test %.1f%%)", row["setting"],
                         seed, row["val_loss"], stats["validation"]["words_median"],
                         100 * stats["validation"]["none_share"], 100 * stats["test"]["none_share"])
                with stage_run(f"selector {row['setting']} seed={seed}", parent.run_id) as run:
                    run.params(setting | {"seed": seed, "steps": steps})
                    run.metrics({"val_loss": row["val_loss"], **{f"{name}_{k}": v for name in ("validation", "test")
                                                                 for k, v in stats[name].items()}})
        by_setting = {}
        for r in rows:
            by_setting.setdefault(r["setting"], []).append(r)
        holding = {k: statistics.fmean(r["val_loss"] for r in rs) for k, rs in by_setting.items()
                   if all(r["holds"] for r in rs)}
        chosen = min(holding, key=holding.get) if holding else None
        header = (f"### Selector sweep ({grid}): phase 1, {steps} steps of {cfg.batch_size} on {dataset} fold {fold} "
                  f"({len(train)} training problems), seeds {', '.join(map(str, seeds))}; scored on the "
                  f"{len(val)}-problem validation slice, test problems ({len(test)}) only counted")
        report = {"grid": grid, "steps": steps, "seeds": seeds, "chosen": chosen, "rows": rows}
        out = OUT.with_name(f"{OUT.name}_{grid}")
        write_json(out.with_suffix(".json"), report)
        atomic_write_text(out.with_suffix(".md"), _markdown(rows, chosen, header))
        parent.artifact(out.with_suffix(".md"))
        parent.artifact(out.with_suffix(".json"))
    log.info("chosen: %s", chosen)
    return report


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--params", default="params.yaml")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--steps", type=int, default=60, help="phase-1 steps per run")
    cli.add_argument("--max-train", type=int, default=0, help="training problems drawn (0 = the whole fold)")
    cli.add_argument("--grid", choices=sorted(GRIDS), default="seeds")
    cli.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    args = cli.parse_args()
    run_stage(sweep_selector, params_or_exit(args.params), args.dataset, args.fold, args.steps, args.max_train,
              args.grid, args.seeds)
