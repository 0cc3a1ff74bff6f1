"""Stage `report`: the paper's Tables 2-5 from the runs that exist, with the paper's figures alongside.

Table 2 (every model), Table 3 (% novel, ACC-eq on novel problems, Dist-3), Table 4 (the ablation variants
that ran, plus the default "ours" as the full model) and Table 5 (keywords the selector picks), each as one table
per dataset (mwpgen/evaluation/tables.py). Table 2 compares every model with GPT-pre, Table 4 every variant with the
full model, on the same test problems: a paired bootstrap over the per-problem records of results/predictions
(seeded with experiment.seed; mwpgen/evaluation/statistics.py) gives the 95% interval of each difference.
Writes reports/table{2,3,4,5}.{md,csv,tex} and reports/README.md (tables + what was run), metrics/report.json
for `dvc metrics show/diff`, and logs every table and per-fold prediction file to MLflow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from prefect import flow, get_run_logger

from flows.common import PROJECT_ROOT, fold_paths, params_or_exit, read_metrics, run_stage, stage_args
from mwpgen import paper, registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.evaluation.statistics import (
    BASELINE,
    FULL_MODEL,
    REFERENCE_METRICS,
    ablation_runs,
    ablation_summary,
    deltas_vs_gpt_pre,
    judge_summary,
    observed_subsample,
    reported_datasets,
    selection_summary,
    summary,
)
from mwpgen.evaluation.tables import SMOKE_BANNER, folds_table, mark_subsamples, table2, table3, table4, table5
from mwpgen.io import atomic_write_text, read_generations, read_json, read_jsonl, write_json
from mwpgen.judge.readings import LABELLED_FOLD
from mwpgen.ours.ablation import TABLE4_ROWS, table4_rows, variant_of
from tracking.runs import stage_run

REPORTS = PROJECT_ROOT / "reports"
# The judge's precision and recall against blind readings (stage measure_judge; the labels are of one fold), and the
# learned judge's figures on the validation readings that chose it (stage train_judge, the same fold)
JUDGE_MEASURED = fold_paths(None, *LABELLED_FOLD).judge_measurement
JUDGE_TRAINED = fold_paths(None, *LABELLED_FOLD).judge_metrics


def _what_was_run(params: Params, train_metrics: dict[str, dict], other_profiles: dict[str, dict]) -> str:
    """`other_profiles`: _recorded_sizes of the datasets that runs of another profile added."""
    exp, tr = params.experiment, params.train
    o, s2s = tr.ours, tr.seq2seq
    lines = [
        "### What was run",
        "",
        f"- model: `{tr.model}`; datasets: {', '.join(exp.datasets)}; folds: {exp.folds} of "
        f"{params.split.n_folds}; seed {exp.seed}",
        *(
            f"- {d}: training examples per fold: "
            + ", ".join(
                f"{m} {registry.max_train(params, m, d) or 'all'}"
                for m in ("gpt_pre", "ours", registry.EVALUATOR.name, "seq2seq_tf")
            )
            + f" (seeded subsamples); test problems scored per fold: {exp.max_test_of(d) or 'all'}"
            for d in exp.datasets
        ),
        *(
            f"- {d} (runs of `--profile {d}`, which params.yaml does not list now): training examples per fold: "
            + ", ".join(f"{m} {n}" for m, n in sizes["train"].items())
            + f"; test problems scored per fold: {sizes['test']} (as those runs recorded them)"
            for d, sizes in other_profiles.items()
        ),
        f"- GPT/GPT-pre: {tr.generator.epochs} epoch(s), batch {tr.generator.batch_size}, lr {tr.generator.lr}, "
        f"max_steps {tr.generator.max_steps or 'none'}; evaluator: {tr.evaluator.epochs} epoch(s), batch "
        f"{tr.evaluator.batch_size}, lr {tr.evaluator.lr}, max_steps {tr.evaluator.max_steps or 'none'}",
        f"- ours: phase 1 {o.phase1.epochs} epoch(s) max_steps {o.phase1.max_steps or 'none'}, phase 2 "
        f"{o.phase2.epochs} epoch(s) max_steps {o.phase2.max_steps or 'none'}, batch {o.batch_size}, lr {o.lr}; "
        f"alpha {o.alpha}, beta {o.beta}, rho {o.rho}, tau {o.tau}, relaxation {o.relaxation}, context "
        f"{o.context} (selector started from {o.selector_init}; slot of {o.context_tokens} tokens), L_eq on "
        f"{o.equation_text.replace('_', '-')} text, mwp2eq initialised from {o.mwp2eq_init}",
        f"- seq2seq: {s2s.steps} steps (x{s2s.math23k_steps_factor} on Math23K); LSTM {s2s.rnn_layers}x"
        f"{s2s.rnn_hidden} (emb {s2s.emb_dim}), batch {s2s.rnn_batch_size}, Adagrad {s2s.rnn_lr}; transformer "
        f"{s2s.tf_layers} layers x {s2s.tf_d_model} (ff {s2s.tf_ff}, {s2s.tf_heads} heads), {s2s.tf_batch_tokens}"
        f" tokens/batch, Noam warm-up {s2s.tf_warmup_steps}; decoding {s2s.decoding} ({s2s.num_beams})",
        f"- context: {params.keywords.baseline_context} keywords for the baselines (dropout "
        f"{params.keywords.dropout} in training); LM decoding: {params.generate.decoding}, max "
        f"{params.generate.max_new_tokens} new tokens",
        "",
        "| run | training examples | steps | final training loss | wall (s) |",
        "|---|---|---|---|---|",
    ]
    for name, m in sorted(train_metrics.items()):
        if m.get("not_run"):
            lines.append(f"| {name} | | | | not run: {m['not_run']} |")
            continue
        final = m.get("final_train_loss")
        loss = f"{final:.3f}" if final is not None else ""
        wall = m.get("timing", {}).get("wall_s", "")
        lines.append(f"| {name} | {m.get('n_train', '')} | {m.get('steps', '')} | {loss} | {wall} |")
    return "\n".join(lines) + "\n"


def _keyword_examples(exp, datasets: list[str], per_dataset: int = 3) -> tuple[list[dict], dict[str, dict]]:
    """Table 5 material: the selector's picks for the first test problems of each dataset's first fold, and the
    statistics of its picks over every test problem of that fold (selection_summary)."""
    out, selection = [], {}
    for d in datasets:
        k = exp.folds[0]
        paths = fold_paths("ours", d, k)
        if not paths.generations.exists():  # ours has not run on a dataset another profile added
            continue
        heuristic = {r["id"]: r for r in read_jsonl(paths.keywords)}
        rows = read_generations(paths.generations)
        selection[d] = selection_summary([r["context"].split() for r in rows],
                                         [heuristic[r["id"]]["noun"] for r in rows],
                                         [heuristic[r["id"]]["tfidf"] for r in rows])
        for row in rows[:per_dataset]:
            out.append({"dataset": d, "id": row["id"], "problem": row["reference"], "selected": row["context"].split(),
                        "noun": heuristic[row["id"]]["noun"], "tfidf": heuristic[row["id"]]["tfidf"]})
    return out, selection


def _recorded_sizes(scores: list[dict], train_metrics: dict[str, dict], runs: list[tuple[str, int]]) -> dict[str, dict]:
    """dataset -> {"train": {model: training examples}, "test": test problems scored}, the largest over `runs`'
    folds, as those runs recorded them (training metrics' n_train, scores' n): the sizes of a dataset another
    profile added, whose subsample params.yaml no longer says."""
    out: dict[str, dict] = {}
    for d, k in runs:
        sizes = out.setdefault(d, {"train": {}, "test": 0})
        for m in (*registry.names(table2=True), registry.EVALUATOR.name):
            n = train_metrics.get(fold_paths(m, d, k).name, {}).get("n_train")
            if n:
                sizes["train"][m] = max(n, sizes["train"].get(m, 0))
        sizes["test"] = max([s["n"] for s in scores if (s["dataset"], s["fold"]) == (d, k) and "n" in s]
                            + [sizes["test"]])
    return out


def _flat(tree: dict, prefix: str = "") -> dict[str, float]:
    """{"ours": {"arithmetic": {"bleu4": x}}} -> {"ours.arithmetic.bleu4": x}, the dotted names of `dvc metrics`, with
    what MLflow refuses in a metric name (e.g. the "," and "+" of Table 4's row labels) written as "_"."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        key = re.sub(r"[^A-Za-z0-9_\-. :/]", "_", str(key))
        flat = _flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value}
        if out.keys() & flat.keys():
            raise ValueError(f"two metrics would both be logged as {sorted(out.keys() & flat.keys())[0]!r}")
        out |= flat
    return out


def reported_runs(datasets: Sequence[str], folds: Sequence[int], n_folds: int,
                  scored: Callable[[str, int], bool]) -> tuple[set[tuple[str, int]], list[str], list[tuple[str, int]]]:
    """The (dataset, fold) runs the tables show: those params name (`datasets` x `folds`) and those another profile
    has scored (`scored(d, k)`: any model's scores file exists). Returns (the runs scored elsewhere, the datasets
    shown, every run shown in dataset then fold order)."""
    elsewhere = {(d, k) for d in paper.DATASETS for k in range(n_folds)
                 if not (d in datasets and k in folds) and scored(d, k)}
    shown = reported_datasets(list(datasets), {d for d, _ in elsewhere})
    runs = [(d, k) for d in shown for k in range(n_folds) if (d in datasets and k in folds) or (d, k) in elsewhere]
    return elsewhere, shown, runs


@flow(name="report")
def report(params: Params) -> dict:
    log = get_run_logger()
    exp, ab = params.experiment, params.ablation
    models = [m for m in registry.names(table2=True) if m in params.models.generate]
    # Tables 2, 3 and 5 also show the datasets and folds that runs of another profile have scored (MAWPS, Math23K:
    # `--profile mawps`; Arithmetic's folds 1-4: `--profile folds`; then params.yaml back to its default), from the
    # workspace or archive/; and Table 4 the variants an ablation run left scored. A smoke test shows only what it ran.
    def elsewhere(model: str, d: str, k: int) -> bool:
        return not exp.smoke and fold_paths(model, d, k).scores.exists()

    scored_elsewhere, datasets, runs = reported_runs(
        exp.datasets, exp.folds, params.split.n_folds, lambda d, k: any(elsewhere(m, d, k) for m in models))
    # Table 4's rows: the variants listed now, and those an earlier ablation run left scored (`--profile ablation`).
    ablation_models = [(registry.ablation_model(v), d, k) for v in registry.ABLATION_VARIANTS
                       for d in ab.datasets for k in ab.folds
                       if v in ab.variants or elsewhere(registry.ablation_model(v), d, k)]
    # ours tuned on readings (stage tune): Table 2 rows on the folds it was tuned on.
    tu = params.tuning
    tuned_models = [(registry.tuned_model(t), d, k) for t in registry.TUNING_METHODS for d in tu.datasets
                    for k in tu.folds if (d, k) in runs
                    and (t in tu.methods or elsewhere(registry.tuned_model(t), d, k))]
    table2_models = [*models, *dict.fromkeys(m for m, _, _ in tuned_models)]
    runs_of = [(m, d, k) for m in models for d, k in runs] + ablation_models + tuned_models
    # A model whose evaluate stage has not run (e.g. `dvc repro` of chosen stages) keeps empty cells, said here.
    score_files = [fold_paths(m, d, k).scores for m, d, k in runs_of]
    missing = [str(f.relative_to(PROJECT_ROOT)) for f in score_files if not f.exists()]
    if missing:
        log.warning("no scores yet, so these cells stay empty: %s", ", ".join(missing))
    scores = [read_json(f) for f in score_files if f.exists()]
    trained = [(m, d, k) for m in (*models, registry.EVALUATOR.name) for d, k in runs] + ablation_models + tuned_models
    trained_paths = [fold_paths(m, d, k) for m, d, k in trained]
    train_metrics = {p.name: read_metrics(p.train_metrics, p.train_timing) for p in trained_paths
                     if p.train_metrics.exists() or p.model == registry.EVALUATOR.name}  # the oracle row
    machines = {(p.model, p.dataset, p.fold): train_metrics[p.name].get("machine") for p in trained_paths
                if p.name in train_metrics}  # where each model was trained (flows.common.write_metrics)
    evaluator = {(d, k): train_metrics[fold_paths(registry.EVALUATOR.name, d, k).name] for d, k in runs}
    # the training sizes say when ACC-eq's instrument read another share of the fold than the generators did
    generator = {(d, k): train_metrics.get(fold_paths(BASELINE, d, k).name, {}) for d, k in runs}
    oracle = [{"model": registry.EVALUATOR.name, "dataset": d, "fold": k,
               **{key: m[key] for key in (*REFERENCE_METRICS, "chance_equation", "n_train") if key in m},
               **({"generator_n_train": generator[(d, k)]["n_train"]} if "n_train" in generator[(d, k)] else {})}
              for (d, k), m in evaluator.items()]
    # Per-problem records for the paired comparisons with GPT-pre (Table 2) and the full model (Table 4), also on the
    # ablation folds where they have run.
    compared = {*runs_of, *((base, d, k) for _, d, k in ablation_models for base in (BASELINE, FULL_MODEL))}
    predictions = {r: read_jsonl(fold_paths(*r).predictions) for r in sorted(compared)
                   if fold_paths(*r).predictions.exists()}
    # Table 2's Δ: each model on the folds it is reported on (not the full model's extra ablation folds)
    reported = set(runs_of)
    deltas = deltas_vs_gpt_pre({r: p for r, p in predictions.items() if r in reported or r[0] == BASELINE}, exp.seed)
    trained_variants = [variant_of(m) for m, _, _ in ablation_models]
    examples, selection = _keyword_examples(exp, datasets)
    judge = read_json(JUDGE_MEASURED) if JUDGE_MEASURED.exists() else None
    trained_judge = read_json(JUDGE_TRAINED) if JUDGE_TRAINED.exists() else None
    ablation = ablation_runs(scores, lambda m: variant_of(m, trained_variants), table4_rows, ab.datasets, ab.folds,
                             predictions, exp.seed)
    with stage_run("report") as run:
        run.params({"datasets": datasets, "folds": exp.folds, "model": params.train.model,
                    "ablation_variants": ab.variants})
        base_model = params.train.model  # the row labels say what GPT, GPT-pre and ours are built on
        tuned_on = {m: {d for t, d, _ in tuned_models if t == m} for m, _, _ in tuned_models}
        tables = {"table2": table2(scores, oracle, table2_models, datasets, deltas, judge, base_model=base_model,
                                   trained_judge=trained_judge, only_on=tuned_on),
                  "table3": table3(scores, table2_models, datasets, base_model=base_model),
                  "table4": table4(ablation, TABLE4_ROWS, ab.datasets, judge, base_model=base_model,
                                   trained_judge=trained_judge),
                  "table5": table5(examples, selection=selection),
                  "table2_folds": folds_table(scores, machines, table2_models, base_model=base_model)}
        # the sizes of a dataset another profile added (this one's own folds are whole or params say their subsample)
        other_profiles = _recorded_sizes(scores, train_metrics,
                                         sorted((d, k) for d, k in scored_elsewhere if d not in exp.datasets))
        subsampled = {d: (exp.max_train_of(d), exp.max_test_of(d)) for d in exp.datasets
                      if exp.max_train_of(d) or exp.max_test_of(d)}
        for d, sizes in other_profiles.items():
            full = load_fold(PROJECT_ROOT / "data", d, exp.folds[0], seed=exp.seed, validation_size=exp.validation_size)
            generators = [n for m, n in sizes["train"].items() if m != registry.EVALUATOR.name]
            observed = observed_subsample(max(generators, default=0), sizes["test"],
                                          full.n_train_full, full.n_test_full)
            if observed:
                subsampled[d] = observed
        for table in tables.values():
            mark_subsamples(table, subsampled)
            if exp.smoke:
                table.banner = SMOKE_BANNER
        for name, table in tables.items():
            for ext in ("md", "csv", "tex"):
                path = REPORTS / f"{name}.{ext}"
                atomic_write_text(path, getattr(table, {"md": "markdown", "tex": "latex"}.get(ext, ext))())
                run.artifact(path, "tables")
        title = "# mwpgen smoke test (not results)" if exp.smoke else "# mwpgen results"
        readme = title + "\n\n" + "\n".join(t.markdown() for t in tables.values()) + "\n" + \
                 _what_was_run(params, train_metrics, other_profiles)
        atomic_write_text(REPORTS / "README.md", readme)
        run.artifact(REPORTS / "README.md", "tables")
        metrics = summary(scores, oracle, deltas) | {"table4": ablation_summary(ablation),
                                                     "judge": judge_summary(judge, trained_judge)}
        write_json(PROJECT_ROOT / "metrics" / "report.json", metrics)
        run.artifact(PROJECT_ROOT / "results" / "predictions", "predictions")
        run.metrics(_flat(metrics))
        log.info("\n%s", readme)
    return metrics


if __name__ == "__main__":
    run_stage(report, params_or_exit(stage_args(__doc__).params))
