"""Stage `train_judge`: the learned consistency judge of one (dataset, fold) (mwpgen/learned_judge.py).

An LM (params `judge.backbone`: the fold's evaluator, or the pre-trained LM) reads "problem: M equation: E
consistent:"; a linear head on its hidden state after `judge.layer` decoder layers says p(M encodes E). The head is
fitted on the blind readings of training-fold equations only (the `train` part: data/labels/corpus); with
`judge.finetune_layers` the top layers are trained with it, one run per seed. The readings of validation equations
(data/labels/judge's dev part, data/labels/verify_pools' validation pools) choose the seed (best AUC) and the
threshold: the highest that accepts `judge.recall` of the validation problems read right. Test readings are never
read here: measure_judge measures the judge on them (mwpgen/data/readings.py keeps the parts apart).

Writes the judge to models/judge/<dataset>/fold<k> (backbone layers, head, judge.json with its threshold and
validation figures) and metrics/judge_train/<dataset>/fold<k>.json (validation AUC, precision at recall 0.5,
precision and recall at the threshold, the readings' counts, wall time), both logged to the fold's MLflow run
(`judge x <dataset>` -> `fold k`). Every reading was generated on one fold (blind_labels.LABELLED_FOLD): another fold
gets a folder saying it has no judge, and the stages and `mwpgen generate` then keep the rule (mwpgen/judge.py).
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.data.readings import CHOOSING_SETS, LABELS, readings
from mwpgen.evaluation.blind_labels import LABELLED_FOLD
from mwpgen.io import write_json
from mwpgen.judge_training import check_classes, subsample
from mwpgen.learned_judge import save_no_judge
from mwpgen.paths import PROJECT_ROOT
from tasks.train_judge import train_judge_model
from tracking.runs import fold_run

MODEL = "judge"  # its MLflow runs: `judge x <dataset>` -> `fold k`


def _counts(rows: list[dict]) -> dict:
    return {"n": len(rows), "right": sum(r["label"] for r in rows), "problems": len({r["group"] for r in rows})}


@flow(name="train_judge")
def train_judge(params: Params, dataset: str, fold: int) -> dict:
    paths = fold_paths(None, dataset, fold)
    cfg, start = params.judge, time.time()
    if (dataset, fold) != LABELLED_FOLD:
        reason = (f"the blind readings (data/labels) are of problems generated on {LABELLED_FOLD[0]} fold "
                  f"{LABELLED_FOLD[1]}; {dataset} fold {fold} has none of its own, so it keeps the rule "
                  "(mwpgen/judge.py)")
        save_no_judge(paths.judge, reason)
        result = {"dataset": dataset, "fold": fold, "n": 0, "no_labels": reason}
        write_json(paths.judge_metrics, result)
        return result
    log = get_run_logger()
    parts = readings(PROJECT_ROOT, CHOOSING_SETS)  # a missing or unreadable label file: one error naming it
    seed = params.experiment.seed
    train = subsample(parts["train"], cfg.max_readings, seed)
    validation = subsample(parts["validation"], cfg.max_readings, seed + 1)
    check_classes(train, "train", [str(LABELS / "corpus")])
    check_classes(validation, "validation", sorted({r["source"] for r in parts["validation"]})
                  or [str(LABELS / s) for s in CHOOSING_SETS[1:]])
    if cfg.backbone == "evaluator":
        source = paths.evaluator.model_dir
        if not (source / "config.json").exists():
            raise FileNotFoundError(f"no evaluator at {source}, which the judge reads with (judge.backbone = "
                                    f"evaluator); run `dvc repro train_evaluator@{dataset}-{fold}` first")
        backbone = f"{source.relative_to(PROJECT_ROOT)} (the fold's evaluator)"
    else:
        source, backbone = params.train.model, f"{params.train.model} (the pre-trained LM)"
    with fold_run(MODEL, dataset, fold, "train_judge") as run:
        run.params({"backbone": backbone, **{f"judge.{k}": v for k, v in cfg.model_dump().items()},
                    "n_train": len(train), "n_validation": len(validation), "seed": seed})
        log.info("judge of %s fold %d: layer %d of %s, %d training readings (%d right), %d validation (%d right)",
                 dataset, fold, cfg.layer, backbone, len(train), sum(r["label"] for r in train), len(validation),
                 sum(r["label"] for r in validation))
        measured = train_judge_model(
            params, source, backbone, train, validation, paths.judge,
            on_log=lambda s, epoch, step, loss: run.metrics({f"finetune_loss_seed{s}": loss}, step=step))
        result = {"dataset": dataset, "fold": fold, "backbone": backbone, "layer": cfg.layer,
                  "finetune_layers": cfg.finetune_layers,
                  "readings": {"train": _counts(train), "validation": _counts(validation)}, **measured,
                  "wall_s": round(time.time() - start, 1)}
        write_json(paths.judge_metrics, result)
        val = measured["validation"]
        run.metrics({"validation_auc": val["auc"], "validation_precision_at_recall_0.5": val["precision_at_recall_0.5"],
                     "validation_precision": val["precision"], "validation_recall": val["recall"],
                     "threshold": val["threshold"], "judge_wall_s": result["wall_s"]})
        run.artifact(paths.judge_metrics)
        log.info("judge of %s fold %d: validation AUC %s, precision %s at recall %s (threshold %.3f)", dataset, fold,
                 val["auc"], val["precision"], val["recall"], val["threshold"])
    return result


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    paths = fold_paths(None, args.dataset, args.fold)
    run_stage(train_judge, params_or_exit(args.params), args.dataset, args.fold, failed_metrics=[paths.judge_metrics])
