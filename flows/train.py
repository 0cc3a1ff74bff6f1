"""Stage `train`: fine-tune one causal LM on one (dataset, fold).

- a causal-LM generator (`models.causal_lm`: GPT-pre, GPT): "equation + context -> problem" with L_LM (paper
  Eq. 3), from the pre-trained LM or the same architecture randomly initialised (mwpgen/registry.py says which);
- `mwp2eq`, the evaluator p_Phi(E | M): "problem -> equation" on the training fold's real problems only. It
  judges ACC-eq for every generator and is never co-trained with one; its accuracy on the real test problems is
  the oracle ACC-eq (the paper's bracketed upper bound).
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import (DATA, fold_keywords, fold_paths, loss_curve_csv, params_or_exit,
                          record_training, run_stage, stage_args)
from mwpgen import registry
from mwpgen.config import Params
from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import acc_eq, equation_symbols
from mwpgen.io import write_jsonl
from mwpgen.lm.prompts import generator_epochs, mwp2eq_examples
from tasks.models import fine_tune, predict_equations
from tasks.tracking import fold_run


@flow(name="train")
def train(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    spec = registry.spec(model)
    is_evaluator = spec.family == "mwp2eq"
    cfg = params.train.evaluator if is_evaluator else params.train.generator
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model), exp.max_test, exp.seed)
    paths = fold_paths(model, dataset, fold)
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"model_id": params.train.model, "family": spec.family, "pretrained": spec.pretrained,
                    "n_train": len(data.train), "n_train_full": data.n_train_full, "seed": exp.seed,
                    **{f"train.{k}": v for k, v in cfg.model_dump().items()}})
        if is_evaluator:
            examples = mwp2eq_examples(data.train)
        else:
            keywords = fold_keywords(paths, params.keywords.baseline_context, "train")
            examples = generator_epochs(data.train, keywords, p=params.keywords.dropout, seed=exp.seed)
        log.info("training %s on %s fold %d: %d examples", model, dataset, fold, len(data.train))
        result = fine_tune(params, cfg, spec.pretrained, examples, paths.model_dir,
                           on_log=lambda rec: run.metrics({"train_loss": rec["loss"],
                                                           "tokens_per_s": rec["tokens_per_s"]}, step=rec["step"]))
        metrics = {"steps": result["steps"], "final_loss": result["losses"][-1] if result["losses"] else None,
                   "wall_s": round(result["wall_time_s"], 1), "tokens": result["tokens"],
                   "tokens_per_s": round(result["tokens"] / max(result["wall_time_s"], 1e-9), 1),
                   "n_train": len(data.train)}
        if is_evaluator:
            start = time.time()
            predicted = predict_equations(params, paths.model_dir, [r["text"] for r in data.test])
            metrics["oracle_acc_eq"] = acc_eq(predicted, [r["equation"] for r in data.test])
            metrics["n_test"] = len(data.test)
            metrics["parse_wall_s"] = round(time.time() - start, 1)
            write_jsonl(paths.oracle, [{"id": r["id"], "text": r["text"], "equation": r["equation"], "parsed": p,
                                        "correct": equation_symbols(p) == equation_symbols(r["equation"])}
                                       for r, p in zip(data.test, predicted)])
            run.artifact(paths.oracle, "oracle")
            log.info("oracle ACC-eq on %d real test problems: %.3f", len(data.test), metrics["oracle_acc_eq"])
        record_training(run, paths, metrics, loss_curve_csv(result["losses"]))
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=(*registry.names("causal_lm"), registry.EVALUATOR.name))
    run_stage(train, params_or_exit(args.params), args.model, args.dataset, args.fold)
