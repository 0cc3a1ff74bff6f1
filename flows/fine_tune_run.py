"""One causal LM fine-tuned inside its fold's MLflow run: what stages `train_generator` (flows/train_generator.py)
and `train_evaluator` (flows/train_evaluator.py) share, and flows/train_distributed.py's rank 0 runs.

Each trains to its validation optimum: the loss on the fold's validation slice (`experiment.validation_size`
problems carved from the training fold, the same for every model) is measured every `eval_every` steps and at
each epoch's end, the saved model is the one of lowest validation loss (the evaluator's: of best exact parse
accuracy on the slice, `train.evaluator.checkpoint_by`), and `patience` evaluations without improvement stop the
run (`epochs` stays the cap). A killed run resumes from its state in checkpoints/
(FoldPaths.resume_dir), deleted once the model is saved. Curves: MLflow `train_loss` / `val_loss` (/ `val_score`) by
step and plots/train (step,train_loss,val_loss); metrics by the names every trainer shares (mwpgen/training_metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prefect import get_run_logger

from flows.common import fold_paths
from mwpgen import registry
from mwpgen.config.schema import LMTrainParams, Params
from mwpgen.data.folds import Fold
from mwpgen.lm.prompts import LMExample
from mwpgen.paths import FoldPaths
from mwpgen.training_metrics import curve_csv, log_metrics, training_metrics
from tasks.fine_tune import fine_tune


@dataclass
class TrainingData:
    """What a stage trains on. Every rank of a data-parallel run builds the same (flows/train_distributed.py)."""
    cfg: LMTrainParams  # its section of params.train
    data: Fold
    examples: list[LMExample] | Callable[[int], list[LMExample]]  # or epoch -> examples (generator_epochs)
    validation: list[LMExample]
    val_score: Callable | None  # the checkpoint score (None: the validation loss)


def fine_tune_in_run(run, params: Params, model: str, dataset: str, fold: int, training: TrainingData,
                     data_parallel: bool) -> tuple[FoldPaths, dict, str]:
    """Fine-tune `model` on `training` inside `run` (tracking.runs.fold_run), logging its params, loss points and
    validations there; returns its paths, its metrics (mwpgen/training_metrics.py) and its curve, not yet written
    (flows.common.record_training), so that a stage can add metrics of its own."""
    log = get_run_logger()
    spec = registry.spec(model)
    cfg, data = training.cfg, training.data
    paths = fold_paths(model, dataset, fold)
    run.params({"model_id": params.train.model, "family": spec.family, "pretrained": spec.pretrained,
                "n_train": len(data.train), "n_train_full": data.n_train_full,
                "n_validation": len(data.validation), "seed": params.experiment.seed,
                **{f"train.{k}": v for k, v in cfg.model_dump().items()}})
    log.info("training %s on %s fold %d: %d examples, %d validation", model, dataset, fold, len(data.train),
             len(training.validation))
    result = fine_tune(params, cfg, spec.pretrained, training.examples, paths.model_dir,
                       on_log=lambda rec: run.metrics(log_metrics(rec), step=rec["step"]),
                       validation=training.validation, resume_dir=paths.resume_dir,
                       on_eval=lambda rec: run.metrics({k: rec[k] for k in ("val_loss", "val_score") if k in rec},
                                                       step=rec["step"]),
                       val_score=training.val_score, data_parallel=data_parallel)
    metrics = training_metrics(
        result, {"best_val_parse_accuracy": result["best_val_score"], "evaluations": len(result["validations"]),
                 "precision": result["precision"], "tokens": result["tokens"], "n_train": len(data.train),
                 "n_validation": len(data.validation)},
        {"tokens_per_s": round(result["timing"]["tokens_per_s"], 1)})
    return paths, metrics, curve_csv(result["history"], result["validations"])


def join_training(params: Params, model: str, dataset: str, fold: int, training: TrainingData) -> None:
    """A data-parallel rank other than 0: the stage's fine-tune task on the same examples (checked across ranks
    before the first step), with no Prefect or MLflow run of its own."""
    paths = fold_paths(model, dataset, fold)
    fine_tune.fn(params, training.cfg, registry.spec(model).pretrained, training.examples, paths.model_dir,
                 on_log=None, validation=training.validation, resume_dir=paths.resume_dir,
                 val_score=training.val_score, data_parallel=True)
