"""Stage `train_judge`: the learned consistency judge of one (dataset, fold) (mwpgen/judge/model.py).

An LM (params `judge.backbone`: the fold's evaluator, or the pre-trained LM) reads "problem: M equation: E consistent:";
a linear head on its hidden state after `judge.layer` decoder layers says p(M encodes E). The head is fitted on the
blind readings of training-fold equations only (the `train` part: data/labels/corpus, corpus_round2 and corpus_round3);
with `judge.finetune_layers` the top layers are trained with it, one run per seed. The readings of validation equations
(data/labels/judge's validation part, data/labels/verify_pools' validation pools) choose the seed (best AUC) and the
threshold: the highest that accepts `judge.recall` of the validation problems read right; and the thresholds "verified:
yes" is held to, per equation shape, for precision 0.9 (mwpgen/judge/verified.py). Test
readings are never read here: measure_judge measures the judge on them (mwpgen/judge/readings.py keeps the parts apart).

The rule (mwpgen/judge/rule.py `judged`, with the fold's evaluator's greedy parse, as evaluate applies it) judges the
same validation readings. The judge is tried alone and gated by the rule (accepting only what the rule accepts); the
form of higher validation precision at `judge.recall` is kept. It must then earn its place: it is adopted only if its
precision at its threshold is above the rule's precision (mwpgen.judge.choose.against_the_rule).

Writes models/judge/<dataset>/fold<k>: the adopted judge (backbone layers, head, judge.json with its threshold, its
form and validation figures), or no_judge.json saying why there is none (with the figures); and
metrics/judge_train/<dataset>/fold<k>.json (validation AUC, precision at recall 0.5, precision and recall at the
threshold, for each form and for the chosen one; the rule's precision and recall; whether it was adopted; the
readings' counts, any disagreeing readings, wall time), both logged to the fold's MLflow run (`judge x <dataset>` ->
`fold k`). Every reading was generated on one fold (readings.LABELLED_FOLD): another fold gets a folder saying it
has no judge. Where there is none, the stages and `mwpgen generate` keep the rule.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.data.folds import test_ids
from mwpgen.io import write_json
from mwpgen.judge.choose import check_classes, subsample
from mwpgen.judge.readings import CHOOSING_SETS, CORPORA, LABELLED_FOLD, LABELS, readings, refuse_leaks
from mwpgen.judge.rule import judged
from mwpgen.judge.saved import save_no_judge
from mwpgen.paths import PROJECT_ROOT
from tasks.parse import predict_equations
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
                  "(mwpgen/judge/rule.py)")
        save_no_judge(paths.judge, reason)
        result = {"dataset": dataset, "fold": fold, "n": 0, "no_labels": reason}
        write_json(paths.judge_metrics, result)
        return result
    log = get_run_logger()
    conflicts: list[str] = []  # readings of one text that disagree: kept first, and said
    parts = readings(PROJECT_ROOT, CHOOSING_SETS, on_conflict=conflicts.append)  # a bad file: one error naming it
    for line in conflicts:
        log.warning("readings disagree: %s", line)
    seed = params.experiment.seed
    train = subsample(parts["train"], cfg.max_readings, seed)
    validation = subsample(parts["validation"], cfg.max_readings, seed + 1)
    # Built on training-fold and validation readings: refused where they are the fold's test problems.
    refuse_leaks((r["group"] for r in train + validation), test_ids(PROJECT_ROOT / "data", dataset, fold),
                 "train_judge", f"{dataset} fold {fold}")
    check_classes(train, "train", [str(LABELS / name) for name in CORPORA])
    check_classes(validation, "validation", sorted({r["source"] for r in parts["validation"]})
                  or [str(LABELS / s) for s in CHOOSING_SETS[1:]])
    evaluator = paths.evaluator.model_dir
    if not (evaluator / "config.json").exists():  # the rule's parser, and the backbone by default
        raise FileNotFoundError(f"no evaluator at {evaluator}: the rule the judge is compared with parses with it; run "
                                f"`dvc repro train_evaluator@{dataset}-{fold}` first")
    if cfg.backbone == "evaluator":
        source, backbone = evaluator, f"{evaluator.relative_to(PROJECT_ROOT)} (the fold's evaluator)"
    else:
        source, backbone = params.train.model, f"{params.train.model} (the pre-trained LM)"
    with fold_run(MODEL, dataset, fold, "train_judge") as run:
        run.params({"backbone": backbone, **{f"judge.{k}": v for k, v in cfg.model_dump().items()},
                    "n_train": len(train), "n_validation": len(validation), "seed": seed})
        log.info("judge of %s fold %d: layer %d of %s, %d training readings (%d right), %d validation (%d right)",
                 dataset, fold, cfg.layer, backbone, len(train), sum(r["label"] for r in train), len(validation),
                 sum(r["label"] for r in validation))
        rule = rule_verdicts(params, evaluator, validation)
        measured = train_judge_model(
            params, source, backbone, train, validation, rule, paths.judge,
            on_log=lambda s, epoch, step, loss: run.metrics({f"finetune_loss_seed{s}": loss}, step=step))
        versus = measured["against_rule"]
        result = {"dataset": dataset, "fold": fold, "backbone": backbone, "layer": cfg.layer,
                  "finetune_layers": cfg.finetune_layers, "adopted": versus["adopted"],
                  "gated_by_rule": measured["gated_by_rule"],
                  "readings": {"train": _counts(train), "validation": _counts(validation)}, **measured,
                  "label_conflicts": conflicts, "wall_s": round(time.time() - start, 1)}
        write_json(paths.judge_metrics, result)
        val = measured["validation"]
        run.metrics({k: v for k, v in {
            "validation_auc": val["auc"], "validation_precision_at_recall_0.5": val["precision_at_recall_0.5"],
            "validation_precision": val["precision"], "validation_recall": val["recall"], "threshold": val["threshold"],
            "rule_validation_precision": versus["rule_precision"], "rule_validation_recall": versus["rule_recall"],
            "gated_by_rule": float(measured["gated_by_rule"]), "adopted": float(versus["adopted"]),
            "verified_validation_precision": measured["verified"]["validation_all"]["precision"],
            "verified_validation_accepted": measured["verified"]["validation_all"]["accepted"],
            "judge_wall_s": result["wall_s"]}.items() if v is not None})
        run.artifact(paths.judge_metrics)
        log.info("judge of %s fold %d (%s): validation AUC %s, precision %s at recall %s (threshold %.3f); %s",
                 dataset, fold, "gated by the rule" if measured["gated_by_rule"] else "alone", val["auc"],
                 val["precision"], val["recall"], val["threshold"], versus["reason"])
        chosen = measured["verified"]["thresholds"]
        log.info('"verified: yes" held to precision %s per shape: %s', measured["verified"]["precision_target"],
                 ", ".join(f"{shape} {'never' if t is None else f'p >= {t:.3f}'}" for shape, t in chosen.items()))
    return result


def rule_verdicts(params: Params, evaluator, rows: list[dict]) -> list[bool]:
    """The rule's verdict on each reading (mwpgen.judge.rule.judged with the evaluator's greedy parse, as the evaluate
    stage's consistency (judged) column applies it)."""
    parsed = predict_equations(params, evaluator, [r["problem"] for r in rows])
    return [judged(parse, r["equation"], r["problem"]) for parse, r in zip(parsed, rows)]


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    paths = fold_paths(None, args.dataset, args.fold)
    run_stage(train_judge, params_or_exit(args.params), args.dataset, args.fold, failed_metrics=[paths.judge_metrics])
