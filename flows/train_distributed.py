"""Stage `train` data-parallel: one causal LM (GPT-pre, GPT or the evaluator mwp2eq) on one (dataset, fold), one
process per device, writing what `python -m flows.train` writes (model folder, metrics/train, plots/train, MLflow
run):

    torchrun --nproc_per_node N -m flows.train_distributed --model gpt_pre --dataset arithmetic --fold 0

`train.<generator|evaluator>.batch_size` is per process: the global batch is N x batch_size (docs/distributed.md).
Rank 0 runs flows/train.py's flow itself; the other ranks build the same examples and join its training
(mwpgen/distributed.py), with no Prefect or MLflow run of their own.
"""

from __future__ import annotations

import os
from unittest import mock

import torch

import tasks.models
from flows.common import DATA, fold_keywords, fold_paths, params_or_exit, run_stage, stage_args
from flows.train import train, validation_parse_accuracy
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.distributed import train_causal_lm_distributed
from mwpgen.lm.prompts import generator_epochs, generator_example, mwp2eq_examples


def join_training(params: Params, model: str, dataset: str, fold: int) -> None:
    """A rank other than 0: the stage's fine-tune task on the examples flows/train.py builds (the same data is
    checked across ranks before the first step)."""
    spec = registry.spec(model)
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model), exp.max_test, exp.seed,
                     validation_size=exp.validation_size)
    paths = fold_paths(model, dataset, fold)
    if spec.family == "mwp2eq":
        cfg = params.train.evaluator
        examples, validation = mwp2eq_examples(data.train), mwp2eq_examples(data.validation)
        by_parses = cfg.checkpoint_by == "parse_accuracy" and data.validation
        val_score = validation_parse_accuracy(data.validation, params.generate.batch_size) if by_parses else None
    else:
        cfg, val_score = params.train.generator, None
        keywords = fold_keywords(paths, params.keywords.baseline_context, "train")
        examples = generator_epochs(data.train, keywords, p=params.keywords.dropout, seed=exp.seed)
        validation = [generator_example(r["equation"], keywords[r["id"]], r["text"]) for r in data.validation]
    tasks.models.fine_tune.fn(params, cfg, spec.pretrained, examples, paths.model_dir, on_log=None,
                              validation=validation, resume_dir=paths.resume_dir, val_score=val_score)


def main() -> None:
    args = stage_args(__doc__, dataset=True, fold=True, models=(*registry.names("causal_lm"), registry.EVALUATOR.name))
    params = params_or_exit(args.params)
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit("error: start it with torchrun --nproc_per_node N -m flows.train_distributed ...")
    if torch.cuda.is_available():  # "cuda" = this rank's GPU, for the model loading as for the training
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    # The stage's fine-tune task (model loading, settings, resume folder, fingerprint) calls train_causal_lm by its
    # name in tasks.models: swapping that one name makes it data-parallel without a second copy of the task.
    with mock.patch.object(tasks.models, "train_causal_lm", train_causal_lm_distributed):
        if int(os.environ["RANK"]) == 0:
            run_stage(train, params, args.model, args.dataset, args.fold)
        else:
            join_training(params, args.model, args.dataset, args.fold)


if __name__ == "__main__":
    main()
