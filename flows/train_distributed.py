"""Stages `train_generator` and `train_evaluator` data-parallel: one causal LM (GPT-pre, GPT or the evaluator) on
one (dataset, fold), one process per device, writing what `python -m flows.train_generator` (or
`flows.train_evaluator`) writes (model folder, metrics/train, plots/train, MLflow run):

    torchrun --nproc_per_node N -m flows.train_distributed --model gpt_pre --dataset arithmetic --fold 0

`train.<generator|evaluator>.batch_size` is per process: the global batch is N x batch_size (docs/distributed.md).
Rank 0 runs the stage's flow itself; the other ranks build the same examples and join its training
(mwpgen/lm/distributed.py), with no Prefect or MLflow run of their own.
"""

from __future__ import annotations

import os

import torch

from flows.common import params_or_exit, run_stage, stage_args
from flows.fine_tune_run import join_training
from flows.train_evaluator import evaluator_training_data, train_evaluator
from flows.train_generator import generator_training_data, train_generator
from mwpgen import registry


def main() -> None:
    args = stage_args(__doc__, dataset=True, fold=True, models=(*registry.names("causal_lm"), registry.EVALUATOR.name))
    params = params_or_exit(args.params)
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit("error: start it with torchrun --nproc_per_node N -m flows.train_distributed ...")
    if torch.cuda.is_available():  # "cuda" = this rank's GPU, for the model loading as for the training
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    is_evaluator = args.model == registry.EVALUATOR.name
    if int(os.environ["RANK"]) == 0:
        if is_evaluator:
            run_stage(train_evaluator, params, args.dataset, args.fold, True)
        else:
            run_stage(train_generator, params, args.model, args.dataset, args.fold, True)
    else:
        training = (evaluator_training_data(params, args.dataset, args.fold) if is_evaluator
                    else generator_training_data(params, args.model, args.dataset, args.fold))
        join_training(params, args.model, args.dataset, args.fold, training)


if __name__ == "__main__":
    main()
