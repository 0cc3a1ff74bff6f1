"""Stage `tune`: ours' generator tuned on blind readings (mwpgen/tuning.py) — RFT on read-right candidates or DPO on
right-vs-wrong pairs against ours as the frozen reference — then generated and scored as model `ours-<method>`.

The readings are those of the corpora `tuning.corpora` names (data/labels/corpus, corpus_round2, corpus_round3):
candidates written for Arithmetic fold 0's training equations, read blind, so no validation or test label ever
tunes. The selector and the co-trained mwp2eq are ours' own, unchanged.

A killed tuning resumes from its state in checkpoints/ (FoldPaths.resume_dir), deleted once the tuned bundle is
saved. There is no validation slice (every reading is of a training equation), so tuning runs its whole schedule.

The default run tunes by RFT (params.yaml: tuning.methods); DPO too: dvc exp run -S 'tuning.methods=[rft,dpo]'
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.common import DATA, fold_paths, params_or_exit, record_training, run_stage, stage_args
from flows.evaluate import evaluate
from flows.generate import generate
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold, test_ids
from mwpgen.judge.readings import refuse_leaks, tuning_candidates
from mwpgen.paths import PROJECT_ROOT
from mwpgen.training_metrics import curve_csv, log_metrics, training_metrics
from tasks.tune import tune_ours_bundle
from tracking.runs import fold_run


@flow(name="tune")
def tune(params: Params, method: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    cfg, exp = params.tuning, params.experiment
    model = registry.tuned_model(method)
    base, paths = fold_paths("ours", dataset, fold), fold_paths(model, dataset, fold)
    readings = tuning_candidates(PROJECT_ROOT, cfg.corpora, cfg.candidates_from)
    # Written for fold 0's training problems, which are folds 1-4's test problems: never scored there.
    refuse_leaks((r["id"] for r in readings), test_ids(DATA, dataset, fold), "tune", f"{dataset} fold {fold}")
    data = load_fold(DATA, dataset, fold, registry.max_train(params, "ours", dataset), exp.max_test_of(dataset),
                     exp.seed, validation_size=exp.validation_size)
    # The corpus was drawn for this fold's training problems as the split stood then: a reading whose problem is not
    # a training problem now (another seed or validation size, another data set) must not tune, so it is left out
    # and counted, never used.
    everything = load_fold(DATA, dataset, fold, 0, 0, exp.seed, validation_size=exp.validation_size)
    training_ids = {r["id"] for r in everything.train}
    outside = [r for r in readings if r["id"] not in training_ids]
    if outside:
        log.warning("%d of %d readings are of problems that are not training problems of %s fold %d now "
                    "(key.csv of data/labels/%s, e.g. id %s): left out", len(outside), len(readings), dataset, fold,
                    ", ".join(cfg.corpora), outside[0]["id"])
        readings = [r for r in readings if r["id"] in training_ids]
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"method": method, "base": str(base.model_dir.relative_to(PROJECT_ROOT)),
                    "readings_read": len(readings),
                    **{f"tuning.{k}": v for k, v in cfg.model_dump().items()}})
        log.info("tuning ours on %s fold %d by %s: %d readings (%d read right) in %s, of %s", dataset, fold, method,
                 len(readings), sum(r["label"] for r in readings), ", ".join(cfg.corpora),
                 ", ".join(cfg.candidates_from))
        result = tune_ours_bundle(params, method, base.model_dir, paths.model_dir, readings, data.train,
                                  resume_dir=paths.resume_dir,
                                  on_log=lambda rec: run.metrics(log_metrics(rec), step=rec["step"]))
        history = result["history"]
        own = [k for k in history[0] if k not in ("step", "epoch", "train_loss", "step_s")]  # dpo: margin, accuracy
        metrics = training_metrics(result, {
            "method": method, "n_train": result["n"], "distinct_candidates": result["readings"],
            "readings_not_training": len(outside), "device": result["device"],
            **{k: result[k] for k in ("right_candidates", "mixed_in", "pairs") if k in result},
            **{f"last10_{k}": round(sum(h[k] for h in history[-10:]) / len(history[-10:]), 4)
               for k in ("train_loss", *own)}})
        record_training(run, paths, metrics, curve_csv(history, [], ("epoch", *own)))
    generate(params, model, dataset, fold)
    return {"train": metrics, "scores": evaluate(params, model, dataset, fold)}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, methods=registry.TUNING_METHODS)
    run_stage(tune, params_or_exit(args.params), args.method, args.dataset, args.fold)
