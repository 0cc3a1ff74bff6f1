"""Stage `train_ours`: the paper's method on one (dataset, fold) — context selector q_Psi, generator p_Theta and
a co-trained mwp2eq p_Phi, phase 1 (L_LM + beta L_c) then phase 2 (L_LM + alpha L_eq) (mwpgen/ours/).

`--variant` trains one Table 4 ablation variant instead (mwpgen/ours/ablation.py), as model `ours-<variant>`.
A killed run resumes from checkpoints/<model>/<dataset>/fold<k>/state.pt (kept outside DVC's outputs, which DVC
deletes before a rerun); the finished model is models/<model>/<dataset>/fold<k>/.
"""

from __future__ import annotations

import json
import math

from prefect import flow, get_run_logger

from flows.common import DATA, fold_keywords, fold_paths, params_or_exit, record_training, run_stage, stage_args
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.ours.ablation import variant_params
from mwpgen.ours.inputs import JointExample, epoch_examples
from mwpgen.ours.training import LOSS_KEYS, phase_summary
from mwpgen.training_metrics import curve_csv, log_metrics, training_metrics
from tasks.train_ours import train_ours_bundle
from tracking.runs import fold_run

# Ours' own curve columns, after the shared step,train_loss,val_loss (mwpgen/training_metrics.py).
CURVE_COLUMNS = ("phase", "objective", "eq", "kl", "mwp2eq", "selected_frac", "written_tokens")


def evaluator_parse_accuracy(paths) -> float:
    """The fold's evaluator's best validation parse accuracy: what the co-trained mwp2eq reaches before it drives
    L_eq (mwpgen/ours/parser_gate.py)."""
    path = paths.evaluator.train_metrics
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: ours' co-trained mwp2eq is trained up to the evaluator's parse "
                                f"accuracy, so the evaluator comes first (dvc repro "
                                f"train_evaluator@{paths.dataset}-{paths.fold})")
    metrics = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(metrics.get("best_val_parse_accuracy"), (int, float)):
        raise ValueError(f"{path}: no best_val_parse_accuracy (rerun: dvc repro train_evaluator@{paths.dataset}-"
                         f"{paths.fold})")
    return float(metrics["best_val_parse_accuracy"])


@flow(name="train_ours")
def train_ours(params: Params, dataset: str, fold: int, variant: str | None = None) -> dict:
    log = get_run_logger()
    cfg = variant_params(params.train.ours, variant) if variant else params.train.ours
    model = registry.ablation_model(variant) if variant else "ours"
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model, dataset), exp.max_test_of(dataset),
                     exp.seed, validation_size=exp.validation_size)
    paths = fold_paths(model, dataset, fold)
    keywords = fold_keywords(paths, cfg.context, "train") if cfg.context != "selector" else None
    warm_start = cfg.context == "selector" and cfg.selector_init == "keywords"
    mwp2eq_target = evaluator_parse_accuracy(paths) if cfg.equation_loss and data.validation else None
    tfidf = fold_keywords(paths, "tfidf", "train") if warm_start else None
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"model_id": params.train.model, "variant": variant or "full", "n_train": len(data.train),
                    "n_train_full": data.n_train_full, "seed": exp.seed,
                    **{f"ours.{k}": v for k, v in cfg.model_dump().items()}})
        log.info("training %s on %s fold %d: %d examples, context %s, L_eq %s (%s), L_c %s", model, dataset, fold,
                 len(data.train), cfg.context, cfg.equation_loss, cfg.relaxation, cfg.context_loss)
        validation = [JointExample(r["equation"], r["text"], tuple(keywords[r["id"]]) if keywords else ())
                      for r in data.validation]  # their whole keyword lists: no dropout when measuring
        result = train_ours_bundle(
            params, cfg, epoch_examples(data.train, keywords, params.keywords.dropout, exp.seed), paths,
            on_log=lambda rec: run.metrics(log_metrics(rec), step=rec["step"]), validation=validation,
            selector_keywords=[tfidf[r["id"]] for r in data.train] if warm_start else None,
            mwp2eq_target=mwp2eq_target)
        for v in result["validations"]:
            run.metrics({"val_loss": v["val_loss"]}, step=v["step"])
        s1, s2 = result["steps_run"]  # fewer than scheduled where a phase stopped early
        extra = {"phase1_steps": s1, "phase2_steps": s2, "scheduled_steps": list(result["scheduled_steps"]),
                 "n_train": len(data.train), "n_validation": len(data.validation), "device": result["device"],
                 "best_steps": result["best_steps"],
                 "stopped_phase": next((span["phase"] for span in result["spans"] if span["stopped_at"]), None),
                 "mwp2eq_val_accuracy": result["mwp2eq_val_accuracy"], "mwp2eq_gate": result["mwp2eq_gate"],
                 "selector_warm_start": result["selector_warm_start"]}
        timing = {}
        for phase in (1, 2):
            summary = phase_summary(result["history"], phase, math.ceil(len(data.train) / cfg.batch_size),
                                    params.train.log_every)
            if summary:
                timing[f"phase{phase}_step_s"] = round(summary["step_s"], 3)
                timing[f"phase{phase}_min_per_epoch"] = round(summary["min_per_epoch"], 2)
                extra.update({f"phase{phase}_{k}": round(summary[k], 4) for k in LOSS_KEYS if k in summary})
        metrics = training_metrics(result, extra, timing)
        record_training(run, paths, metrics, curve_csv(result["history"], result["validations"], CURVE_COLUMNS))
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    run_stage(train_ours, params_or_exit(args.params), args.dataset, args.fold)
