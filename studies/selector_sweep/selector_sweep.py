"""The selector's seed check: phase 1 of ours (selector + generator, L_LM + beta L_c) for each setting of a grid and
each seed, scored on the fold's validation slice by the generator's loss with the context the selector picks and by
the selection statistics (words per problem, problems with none). Test problems are only counted, never used to
choose.

A setting HOLDS when, on every seed, at most 5 % of the validation problems get no word and the median is 2-6
words; the chosen setting is the one of lowest mean validation loss among those that hold (none: no choice).
Each run trains phase 1 as train_ours does (train.ours with only the grid's switches changed, the selector's warm
start and keyword dropout included) but without the co-trained mwp2eq, which never touches the selector, cut at
`steps` steps.

`studies/selector_sweep/tracked_sweep.py` runs this with MLflow tracking. Run alone
(`python -m studies.selector_sweep.selector_sweep`) it needs neither Prefect nor MLflow, for a machine that has
neither (a lent GPU):

    python -m studies.selector_sweep.selector_sweep --grid seeds --steps 40 --device cuda --out /tmp/sweep
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

from mwpgen.config.schema import OursTrainParams, Params, load_params
from mwpgen.data.folds import load_fold
from mwpgen.device import resolve_device
from mwpgen.io import atomic_write_text, read_jsonl, write_json
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.selection_stats import context_lm_loss, selection_stats
from mwpgen.ours.train_and_save import build_models, warm_start_selector
from mwpgen.ours.training import train_joint
from mwpgen.paths import PROJECT_ROOT, FoldPaths

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


def holds(stats: dict) -> bool:
    """A seed's selector selects: few problems without a word, a median count in range (the issue's target)."""
    return stats["none_share"] <= NONE_AT_MOST and MEDIAN_WORDS[0] <= stats["words_median"] <= MEDIAN_WORDS[1]


def label(setting: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in setting.items()) or "params.yaml's train.ours"


def phase1_params(base: OursTrainParams, setting: dict, steps: int) -> OursTrainParams:
    """train.ours with the setting's switches, phase 1 only (no phase 2, no co-trained mwp2eq), cut to `steps`
    steps; `steps` 0 keeps train.ours' whole phase-1 schedule."""
    phase1 = base.phase1.model_dump() if steps == 0 else {"epochs": 100, "max_steps": steps}
    return OursTrainParams.model_validate(base.model_dump() | setting | {
        "context": "selector", "equation_loss": False, "mwp2eq_in_phase1": False,
        "phase1": phase1, "phase2": {"epochs": 0, "max_steps": 0}})


class SweepData:
    """One fold's training / validation / test problems and the training problems' TF-IDF keywords."""

    def __init__(self, params: Params, dataset: str, fold: int, max_train: int, root: Path = PROJECT_ROOT):
        exp = params.experiment
        data = load_fold(root / "data", dataset, fold, max_train, exp.max_test_of(dataset), exp.seed,
                         validation_size=exp.validation_size)
        if not data.validation:
            raise ValueError("the sweep scores on the validation slice: set experiment.validation_size > 0")
        self.train, self.val, self.test = ([JointExample(r["equation"], r["text"]) for r in rows]
                                           for rows in (data.train, data.validation, data.test))
        keywords = {r["id"]: r["tfidf"] for r in read_jsonl(FoldPaths(root, None, dataset, fold).keywords)
                    if r["split"] == "train"}
        self.train_keywords = [keywords[r["id"]] for r in data.train]


def run_one(params: Params, data: SweepData, setting: dict, seed: int, steps: int, device: str) -> dict:
    """Phase 1 of one (setting, seed); its row of the table."""
    cfg = phase1_params(params.train.ours, setting, steps)
    models = build_models(cfg, params.train.model, device=device, seed=seed,
                          mixed_precision=params.train.mixed_precision)
    if cfg.selector_init == "keywords":
        warm_start_selector(models, cfg, data.train, data.train_keywords)
    result = train_joint(models, data.train, cfg, seed=seed, log_every=params.train.log_every,
                         validation=data.val, dropout=params.keywords.dropout)
    stats = {name: {k: v for k, v in selection_stats(models, xs, cfg.threshold, cfg.max_problem_tokens).items()
                    if k != "picks"} for name, xs in (("validation", data.val), ("test", data.test))}
    shares = [h["selected_frac"] for h in result["history"]]
    return {"setting": label(setting), "seed": seed, **stats, "holds": holds(stats["validation"]),
            "val_loss": context_lm_loss(models, data.val, cfg.max_problem_tokens, cfg.threshold, cfg.context_tokens),
            "selected_first": statistics.fmean(shares[:10]), "selected_last": statistics.fmean(shares[-10:]),
            "best_step": result["best_steps"].get("selector"), "train_s": round(result["timing"]["wall_s"], 1)}


def choose(rows: list[dict]) -> str | None:
    """The setting of lowest mean validation loss among those that hold on every seed; None when none holds."""
    by_setting: dict[str, list[dict]] = {}
    for r in rows:
        by_setting.setdefault(r["setting"], []).append(r)
    holding = {k: statistics.fmean(r["val_loss"] for r in rs) for k, rs in by_setting.items()
               if all(r["holds"] for r in rs)}
    return min(holding, key=holding.get) if holding else None


def header(grid: str, steps: int, batch_size: int, dataset: str, fold: int, data: SweepData, seeds: list[int],
           machine: str) -> str:
    return (
        f"### Selector sweep ({grid}): phase 1, {steps or 'all its'} steps of {batch_size} on {dataset} fold {fold} "
        f"({len(data.train)} training problems), seeds {', '.join(map(str, seeds))}; scored on the "
        f"{len(data.val)}-problem validation slice, test problems ({len(data.test)}) only counted; {machine}"
    )


def markdown(rows: list[dict], chosen: str | None, title: str) -> str:
    lines = [
        title,
        "",
        (
            "| setting | seed | val loss | validation: words (median, mean), none | test: words (median, "
            "mean), none | q range | selected share, first / last 10 steps | holds |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        v, t = r["validation"], r["test"]
        lines.append(f"| {r['setting']} | {r['seed']} | {r['val_loss']:.4f} | {v['words_median']:g}, "
                     f"{v['words_mean']:.2f}, {v['none_share']:.1%} | {t['words_median']:g}, {t['words_mean']:.2f}, "
                     f"{t['none_share']:.1%} | {v['q_min']:.3f}-{v['q_max']:.3f} | {r['selected_first']:.2f} / "
                     f"{r['selected_last']:.2f} | {'yes' if r['holds'] else '**no**'} |")
    lines += ["", f"Chosen: {'none (no setting holds on every seed)' if chosen is None else chosen}."]
    return "\n".join(lines) + "\n"


def sweep(params: Params, dataset: str, fold: int, steps: int, max_train: int, grid: str, seeds: list[int],
          device: str, out: Path, machine: str, on_row: Callable[[dict, dict], None] = lambda setting, row: None,
          root: Path = PROJECT_ROOT) -> dict:
    """Every (setting, seed) of the grid; the table to `out`.md and .json, rewritten after each row so a killed
    sweep keeps what it finished. `on_row(setting, row)` observes each row (the flow logs it to MLflow)."""
    data = SweepData(params, dataset, fold, max_train, root)
    title = header(grid, steps, params.train.ours.batch_size, dataset, fold, data, seeds, machine)
    report = {"grid": grid, "steps": steps, "seeds": seeds, "machine": machine, "chosen": None, "rows": []}
    for setting in GRIDS[grid]:
        for seed in seeds:
            report["rows"].append(run_one(params, data, setting, seed, steps, device))
            on_row(setting, report["rows"][-1])
            report["chosen"] = choose(report["rows"])
            write_json(out.with_suffix(".json"), report)
            atomic_write_text(out.with_suffix(".md"), markdown(report["rows"], report["chosen"], title))
    return report


def machine_name(device: str, mixed_precision: bool = True) -> str:
    """Which hardware and precision a table came from (their numerics differ: CUDA bf16, CPU bf16, CPU fp32)."""
    import platform

    import torch

    if device.startswith("cuda"):
        return f"GPU {torch.cuda.get_device_name(0)}"
    from mwpgen.device import cpu_supports_bf16

    precision = ("native bf16" if cpu_supports_bf16() else "fp32") if mixed_precision else "fp32 (mixed_precision off)"
    return f"CPU {platform.processor() or platform.machine()}, {precision}"


def add_arguments(cli: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The sweep's command line, shared by this module and studies/selector_sweep/tracked_sweep.py."""
    cli.add_argument("--params", default="params.yaml")
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--steps", type=int, default=60, help="phase-1 steps per run (0: train.ours' whole phase 1)")
    cli.add_argument("--max-train", type=int, default=0, help="training problems drawn (0 = the whole fold)")
    cli.add_argument("--grid", choices=sorted(GRIDS), default="seeds")
    cli.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    return cli


def main(argv: list[str] | None = None) -> None:
    cli = add_arguments(argparse.ArgumentParser(description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))
    cli.add_argument("--device", default=None, help="torch device (default: params.yaml's train.device)")
    cli.add_argument("--out", type=Path, required=True, help="the table's path without suffix (.md and .json)")
    args = cli.parse_args(argv)
    params = load_params(args.params)
    device = resolve_device(args.device or params.train.device)
    report = sweep(
        params,
        args.dataset,
        args.fold,
        args.steps,
        args.max_train,
        args.grid,
        args.seeds,
        device,
        args.out,
        machine_name(device, params.train.mixed_precision),
        on_row=lambda setting, row: print(
            f"{row['setting']} seed {row['seed']}: val loss "
            f"{row['val_loss']:.4f}, median {row['validation']['words_median']}"
            f" words, none {row['test']['none_share']:.1%} of test",
            flush=True,
        ),
    )
    print("chosen:", report["chosen"])


if __name__ == "__main__":
    main()
