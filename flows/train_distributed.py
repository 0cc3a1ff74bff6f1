"""Stage `train` data-parallel: one causal LM (GPT-pre, GPT or the evaluator mwp2eq) on one (dataset, fold), one
process per device, writing what `python -m flows.train` writes (model folder, metrics/train, plots/train, MLflow
run):

    torchrun --nproc_per_node N -m flows.train_distributed --model gpt_pre --dataset arithmetic --fold 0

`train.<generator|evaluator>.batch_size` is per process: the global batch is N x batch_size (docs/distributed.md).
Rank 0 runs flows/train.py's flow itself; the other ranks build the same examples and join its training
(mwpgen/lm/distributed.py), with no Prefect or MLflow run of their own.
"""

from __future__ import annotations

import os

import torch

from flows.common import fold_paths, params_or_exit, run_stage, stage_args
from flows.train import train, training_data
from mwpgen import registry
from mwpgen.config.schema import Params
from tasks.fine_tune import fine_tune


def join_training(params: Params, model: str, dataset: str, fold: int) -> None:
    """A rank other than 0: the stage's fine-tune task on the examples flows/train.py builds (the same data is
    checked across ranks before the first step), with no Prefect or MLflow run of its own."""
    cfg, _, examples, validation, val_score = training_data(params, model, dataset, fold)
    paths = fold_paths(model, dataset, fold)
    fine_tune.fn(params, cfg, registry.spec(model).pretrained, examples, paths.model_dir, on_log=None,
                 validation=validation, resume_dir=paths.resume_dir, val_score=val_score, data_parallel=True)


def main() -> None:
    args = stage_args(__doc__, dataset=True, fold=True, models=(*registry.names("causal_lm"), registry.EVALUATOR.name))
    params = params_or_exit(args.params)
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit("error: start it with torchrun --nproc_per_node N -m flows.train_distributed ...")
    if torch.cuda.is_available():  # "cuda" = this rank's GPU, for the model loading as for the training
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if int(os.environ["RANK"]) == 0:
        run_stage(train, params, args.model, args.dataset, args.fold, True)
    else:
        join_training(params, args.model, args.dataset, args.fold)


if __name__ == "__main__":
    main()
