"""Stage `report`: the paper's Tables 2 and 3 from the folds that ran, with the paper's figures alongside.

Writes reports/table{2,3}.{md,csv,tex} and reports/README.md (tables + what was run), metrics/report.json for
`dvc metrics show/diff`, and logs every table and per-fold prediction file to MLflow.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.common import EVALUATOR, GENERATORS, PROJECT_ROOT, fold_name, params_or_exit, stage_args
from mwpgen.config import Params
from mwpgen.io import atomic_write_text, read_json, write_json
from mwpgen.report import summary, table2, table3
from tasks.tracking import stage_run

REPORTS = PROJECT_ROOT / "reports"


def _what_was_run(params: Params, train_metrics: dict[str, dict]) -> str:
    exp, tr = params.experiment, params.train
    lines = ["### What was run", "",
             f"- model: `{tr.model}`; datasets: {', '.join(exp.datasets)}; folds: {exp.folds} of "
             f"{params.split.n_folds}; seed {exp.seed}",
             f"- training examples per fold: generators {tr.generator.max_train or exp.max_train or 'all'}, "
             f"evaluator mwp2eq {tr.parser.max_train or exp.max_train or 'all'} (seeded subsamples); test problems "
             f"scored per fold: {exp.max_test or 'all'}",
             f"- generator: {tr.generator.epochs} epoch(s), batch {tr.generator.batch_size}, lr {tr.generator.lr}, "
             f"max_steps {tr.generator.max_steps or 'none'}; parser: {tr.parser.epochs} epoch(s), batch "
             f"{tr.parser.batch_size}, lr {tr.parser.lr}, max_steps {tr.parser.max_steps or 'none'}",
             f"- context: {params.keywords.baseline_context} keywords (dropout {params.keywords.dropout} in "
             f"training); decoding: {params.generate.decoding}, max {params.generate.max_new_tokens} new tokens", "",
             "| run | training examples | steps | final loss | wall (s) |", "|---|---|---|---|---|"]
    for name, m in sorted(train_metrics.items()):
        loss = f"{m['final_loss']:.3f}" if m.get("final_loss") is not None else ""
        lines.append(f"| {name} | {m.get('n_train', '')} | {m['steps']} | {loss} | {m['wall_s']} |")
    return "\n".join(lines) + "\n"


@flow(name="report")
def report(params: Params) -> dict:
    log = get_run_logger()
    exp = params.experiment
    runs = [(d, k) for d in exp.datasets for k in exp.folds]
    scores = [read_json(PROJECT_ROOT / "results" / "scores" / f"{fold_name(m, d, k)}.json")
              for m in GENERATORS for d, k in runs]
    train_metrics = {fold_name(m, d, k): read_json(PROJECT_ROOT / "metrics" / "train" / f"{fold_name(m, d, k)}.json")
                     for m in (*GENERATORS, EVALUATOR) for d, k in runs}
    oracle = [{"model": EVALUATOR, "dataset": d, "fold": k,
               "oracle_acc_eq": train_metrics[fold_name(EVALUATOR, d, k)]["oracle_acc_eq"]} for d, k in runs]
    with stage_run("report") as run:
        run.params({"datasets": exp.datasets, "folds": exp.folds, "model": params.train.model})
        tables = {"table2": table2(scores, oracle, GENERATORS, exp.datasets),
                  "table3": table3(scores, GENERATORS, exp.datasets)}
        for name, table in tables.items():
            for ext in ("md", "csv", "tex"):
                path = REPORTS / f"{name}.{ext}"
                atomic_write_text(path, getattr(table, {"md": "markdown", "tex": "latex"}.get(ext, ext))())
                run.artifact(path, "tables")
        readme = "# mwpgen results\n\n" + "\n".join(t.markdown() for t in tables.values()) + "\n" + \
                 _what_was_run(params, train_metrics)
        atomic_write_text(REPORTS / "README.md", readme)
        run.artifact(REPORTS / "README.md", "tables")
        metrics = summary(scores, oracle)
        write_json(PROJECT_ROOT / "metrics" / "report.json", metrics)
        run.artifact(PROJECT_ROOT / "results" / "predictions", "predictions")
        run.metrics({f"{m}.{d}.{k}": v for m, ds in metrics.items() for d, ks in ds.items() for k, v in ks.items()})
        log.info("\n%s", readme)
    return metrics


if __name__ == "__main__":
    report(params_or_exit(stage_args(__doc__).params))
