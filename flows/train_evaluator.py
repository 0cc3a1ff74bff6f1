"""Stage `train_evaluator`: fine-tune the evaluator p_Phi(E | M) (model `evaluator`, a problem -> equation LM) on
one (dataset, fold)'s real training problems only. It judges ACC-eq for every generator and is never co-trained
with one; its accuracy on the real test problems is the oracle ACC-eq (the paper's bracketed upper bound), written
beside its parses (data/oracle/) with the chance baseline (the most frequent training equation). Its checkpoint is
the one of best exact parse accuracy on the validation slice (`train.evaluator.checkpoint_by`). Training,
checkpoints and curves: flows/fine_tune_run.py.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import DATA, params_or_exit, record_training, run_stage, stage_args
from flows.fine_tune_run import TrainingData, fine_tune_in_run
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.equations import equivalent
from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import acc_eq, equation_symbols, most_frequent_equation
from mwpgen.io import write_jsonl
from mwpgen.lm.prompts import mwp2eq_examples
from mwpgen.lm.training import parse_accuracy
from tasks.parse import predict_equations
from tracking.runs import fold_run

MODEL = registry.EVALUATOR.name


def evaluator_training_data(params: Params, dataset: str, fold: int) -> TrainingData:
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, MODEL, dataset), exp.max_test_of(dataset),
                     exp.seed, validation_size=exp.validation_size)
    cfg = params.train.evaluator
    by_parses = cfg.checkpoint_by == "parse_accuracy" and data.validation
    val_score = validation_parse_accuracy(data.validation, params.generate.batch_size) if by_parses else None
    return TrainingData(cfg, data, mwp2eq_examples(data.train), mwp2eq_examples(data.validation), val_score)


def validation_parse_accuracy(validation: list[dict], batch_size: int):
    """The evaluator's checkpoint score: exact ACC-eq of its greedy parses of the validation slice's problems."""
    problems, references = [r["text"] for r in validation], [r["equation"] for r in validation]
    return lambda model, tokenizer: parse_accuracy(model, tokenizer, problems, references, batch_size=batch_size)


@flow(name="train_evaluator")
def train_evaluator(params: Params, dataset: str, fold: int, data_parallel: bool = False) -> dict:
    """`data_parallel`: this process is rank 0 of a torchrun launch (flows/train_distributed.py)."""
    log = get_run_logger()
    training = evaluator_training_data(params, dataset, fold)
    data = training.data
    with fold_run(MODEL, dataset, fold, "train") as run:
        paths, metrics, curve = fine_tune_in_run(run, params, MODEL, dataset, fold, training, data_parallel)
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
        record_training(run, paths, metrics, curve)
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    run_stage(train_evaluator, params_or_exit(args.params), args.dataset, args.fold)
