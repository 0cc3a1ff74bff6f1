"""Stage `train_generator`: fine-tune one causal-LM generator (`models.causal_lm`: GPT-pre, GPT) on one (dataset,
fold): "equation + context -> problem" with L_LM (paper Eq. 3), from the pre-trained LM or the same architecture
randomly initialised (mwpgen/registry.py says which). The context is the fold's noun keywords with dropout, fresh
each epoch; validation examples keep every keyword. Training, checkpoints and curves: flows/fine_tune_run.py.
"""

from __future__ import annotations

from prefect import flow

from flows.common import DATA, fold_keywords, fold_paths, params_or_exit, record_training, run_stage, stage_args
from flows.fine_tune_run import TrainingData, fine_tune_in_run
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.lm.prompts import generator_epochs, generator_example
from tracking.runs import fold_run


def generator_training_data(params: Params, model: str, dataset: str, fold: int) -> TrainingData:
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model, dataset), exp.max_test_of(dataset),
                     exp.seed, validation_size=exp.validation_size)
    keywords = fold_keywords(fold_paths(model, dataset, fold), params.keywords.baseline_context, "train")
    examples = generator_epochs(data.train, keywords, p=params.keywords.dropout, seed=exp.seed)
    # Validation examples are built once, with every keyword in its order: no dropout, no permutation.
    validation = [generator_example(r["equation"], keywords[r["id"]], r["text"]) for r in data.validation]
    return TrainingData(params.train.generator, data, examples, validation, None)


@flow(name="train_generator")
def train_generator(params: Params, model: str, dataset: str, fold: int, data_parallel: bool = False) -> dict:
    """`data_parallel`: this process is rank 0 of a torchrun launch (flows/train_distributed.py)."""
    training = generator_training_data(params, model, dataset, fold)
    with fold_run(model, dataset, fold, "train") as run:
        paths, metrics, curve = fine_tune_in_run(run, params, model, dataset, fold, training, data_parallel)
        record_training(run, paths, metrics, curve)
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=registry.names("causal_lm"))
    run_stage(train_generator, params_or_exit(args.params), args.model, args.dataset, args.fold)
