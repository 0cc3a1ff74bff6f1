"""Stage `train`: fine-tune one causal LM on one (dataset, fold).

- a causal-LM generator (`models.causal_lm`: GPT-pre, GPT): "equation + context -> problem" with L_LM (paper
  Eq. 3), from the pre-trained LM or the same architecture randomly initialised (mwpgen/registry.py says which);
- `mwp2eq`, the evaluator p_Phi(E | M): "problem -> equation" on the training fold's real problems only. It
  judges ACC-eq for every generator and is never co-trained with one; its accuracy on the real test problems is
  the oracle ACC-eq (the paper's bracketed upper bound).

Both train to their validation optimum: the loss on the fold's validation slice (`experiment.validation_size`
problems carved from the training fold, the same for every model) is measured every `eval_every` steps and at
each epoch's end, the saved model is the one of lowest validation loss (the evaluator's: of best exact parse
accuracy on the slice, `train.evaluator.checkpoint_by`), and `patience` evaluations without improvement stop the
run (`epochs` stays the cap). A killed run resumes from its state in checkpoints/
(FoldPaths.resume_dir), deleted once the model is saved. Curves: MLflow `train_loss` / `val_loss` (/ `val_score`) by step and
plots/train (step,train_loss,val_loss); metrics by the names every trainer shares (mwpgen/training_metrics.py).
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import DATA, fold_keywords, fold_paths, params_or_exit, record_training, run_stage, stage_args
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.data.equations import equivalent
from mwpgen.evaluation.metrics import acc_eq, equation_symbols, most_frequent_equation
from mwpgen.io import write_jsonl
from mwpgen.lm.training import parse_accuracy
from mwpgen.lm.prompts import generator_epochs, generator_example, mwp2eq_examples
from mwpgen.training_metrics import curve_csv, log_metrics, training_metrics
from tasks.fine_tune import fine_tune
from tasks.parse import predict_equations
from tracking.runs import fold_run


def training_data(params: Params, model: str, dataset: str, fold: int):
    """What the stage trains on: (its settings, the fold, training examples, validation examples, the checkpoint
    score or None). Every rank of a data-parallel run builds the same (flows/train_distributed.py)."""
    spec = registry.spec(model)
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model, dataset), exp.max_test_of(dataset), exp.seed,
                     validation_size=exp.validation_size)
    if spec.family == "mwp2eq":
        cfg = params.train.evaluator
        by_parses = cfg.checkpoint_by == "parse_accuracy" and data.validation
        val_score = validation_parse_accuracy(data.validation, params.generate.batch_size) if by_parses else None
        return cfg, data, mwp2eq_examples(data.train), mwp2eq_examples(data.validation), val_score
    keywords = fold_keywords(fold_paths(model, dataset, fold), params.keywords.baseline_context, "train")
    examples = generator_epochs(data.train, keywords, p=params.keywords.dropout, seed=exp.seed)
    # Validation examples are built once, with every keyword in its order: no dropout, no permutation.
    validation = [generator_example(r["equation"], keywords[r["id"]], r["text"]) for r in data.validation]
    return params.train.generator, data, examples, validation, None


@flow(name="train")
def train(params: Params, model: str, dataset: str, fold: int, data_parallel: bool = False) -> dict:
    """`data_parallel`: this process is rank 0 of a torchrun launch (flows/train_distributed.py)."""
    log = get_run_logger()
    spec = registry.spec(model)
    is_evaluator = spec.family == "mwp2eq"
    exp = params.experiment
    cfg, data, examples, validation, val_score = training_data(params, model, dataset, fold)
    paths = fold_paths(model, dataset, fold)
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"model_id": params.train.model, "family": spec.family, "pretrained": spec.pretrained,
                    "n_train": len(data.train), "n_train_full": data.n_train_full,
                    "n_validation": len(data.validation), "seed": exp.seed,
                    **{f"train.{k}": v for k, v in cfg.model_dump().items()}})
        log.info("training %s on %s fold %d: %d examples, %d validation", model, dataset, fold, len(data.train),
                 len(validation))
        result = fine_tune(params, cfg, spec.pretrained, examples, paths.model_dir,
                           on_log=lambda rec: run.metrics(log_metrics(rec), step=rec["step"]),
                           validation=validation, resume_dir=paths.resume_dir,
                           on_eval=lambda rec: run.metrics({k: rec[k] for k in ("val_loss", "val_score") if k in rec},
                                                           step=rec["step"]),
                           val_score=val_score, data_parallel=data_parallel)
        metrics = training_metrics(
            result, {"best_val_parse_accuracy": result["best_val_score"], "evaluations": len(result["validations"]),
                     "precision": result["precision"], "tokens": result["tokens"], "n_train": len(data.train),
                     "n_validation": len(data.validation)},
            {"tokens_per_s": round(result["timing"]["tokens_per_s"], 1)})
        if is_evaluator:
            start = time.time()
            predicted = predict_equations(params, paths.model_dir, [r["text"] for r in data.test])
            references = [r["equation"] for r in data.test]
            metrics["oracle_acc_eq"] = acc_eq(predicted, references)
            metrics["oracle_acc_eq_equivalent"] = acc_eq(predicted, references, equivalent_too=True)
            # The chance row: the most frequent training equation, answered for every test problem.
            chance = most_frequent_equation(data.train)
            metrics["chance_equation"] = chance
            metrics["chance_acc_eq"] = acc_eq([chance] * len(references), references)
            metrics["chance_acc_eq_equivalent"] = acc_eq([chance] * len(references), references, equivalent_too=True)
            metrics["n_test"] = len(data.test)
            metrics["timing"]["parse_wall_s"] = round(time.time() - start, 1)
            write_jsonl(paths.oracle, [{"id": r["id"], "text": r["text"], "equation": r["equation"], "parsed": p,
                                        "correct": equation_symbols(p) == equation_symbols(r["equation"]),
                                        "equivalent": equivalent(p, r["equation"])}
                                       for r, p in zip(data.test, predicted)])
            run.artifact(paths.oracle, "oracle")
            log.info("oracle ACC-eq on %d real test problems: %.3f exact, %.3f equivalent (chance: %.3f, %s)",
                     len(data.test), metrics["oracle_acc_eq"], metrics["oracle_acc_eq_equivalent"],
                     metrics["chance_acc_eq"], chance)
        record_training(run, paths, metrics, curve_csv(result["history"], result["validations"]))
    return metrics


def validation_parse_accuracy(validation: list[dict], batch_size: int):
    """The evaluator's checkpoint score: exact ACC-eq of its greedy parses of the validation slice's problems."""
    problems, references = [r["text"] for r in validation], [r["equation"] for r in validation]
    return lambda model, tokenizer: parse_accuracy(model, tokenizer, problems, references,
                                                            batch_size=batch_size)


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=(*registry.names("causal_lm"), registry.EVALUATOR.name))
    run_stage(train, params_or_exit(args.params), args.model, args.dataset, args.fold)
