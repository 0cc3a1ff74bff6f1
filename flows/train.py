"""Stage `train`: fine-tune one model on one (dataset, fold).

- `gpt_pre`: the pre-trained LM fine-tuned on "equation + context -> problem" with L_LM (paper Eq. 3);
- `gpt`: the same architecture randomly initialised, same objective;
- `mwp2eq`: the evaluator parser p_Phi(E | M), fine-tuned "problem -> equation" on the training fold's real
  problems only. It judges ACC-eq for every generator and is never co-trained with one; its accuracy on the
  real test problems is the oracle ACC-eq (the paper's bracketed upper bound).
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import (DATA, EVALUATOR, GENERATORS, PROJECT_ROOT, fold_keywords, fold_name, loss_curve_csv,
                          params_or_exit, record_training, stage_args)
from mwpgen.config import Params
from mwpgen.data.folds import load_fold
from mwpgen.io import write_jsonl
from mwpgen.lm.prompts import generator_epochs, parser_examples
from mwpgen.evaluation.metrics import acc_eq
from tasks.models import fine_tune, parse
from tasks.tracking import fold_run


@flow(name="train")
def train(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    kind = "parser" if model == EVALUATOR else "generator"
    cfg = params.train.parser if kind == "parser" else params.train.generator
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, cfg.max_train or exp.max_train, exp.max_test, exp.seed)
    name = fold_name(model, dataset, fold)
    checkpoint = PROJECT_ROOT / "models" / name
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"model_id": params.train.model, "kind": kind, "n_train": len(data.train),
                    "n_train_full": data.n_train_full, **{f"train.{k}": v for k, v in cfg.model_dump().items()},
                    "seed": exp.seed})
        if kind == "parser":
            examples = parser_examples(data.train)
        else:
            keywords = fold_keywords(dataset, fold, params.keywords.baseline_context, "train")
            examples = generator_epochs(data.train, keywords, p=params.keywords.dropout, seed=exp.seed)
        log.info("training %s on %s fold %d: %d examples", model, dataset, fold, len(data.train))
        result = fine_tune(params, kind, model != "gpt", examples, checkpoint,
                           on_log=lambda rec: run.metrics({"train_loss": rec["loss"],
                                                           "tokens_per_s": rec["tokens_per_s"]}, step=rec["step"]))
        metrics = {"steps": result["steps"], "final_loss": result["losses"][-1] if result["losses"] else None,
                   "wall_s": round(result["wall_time_s"], 1), "tokens": result["tokens"],
                   "tokens_per_s": round(result["tokens"] / max(result["wall_time_s"], 1e-9), 1),
                   "n_train": len(data.train)}
        if kind == "parser":
            start = time.time()
            predicted = parse(params, checkpoint, [r["text"] for r in data.test])
            metrics["oracle_acc_eq"] = acc_eq(predicted, [r["equation"] for r in data.test])
            metrics["n_test"] = len(data.test)
            metrics["parse_wall_s"] = round(time.time() - start, 1)
            preds = DATA / "oracle" / f"{fold_name(None, dataset, fold)}.jsonl"
            write_jsonl(preds, [{"id": r["id"], "text": r["text"], "equation": r["equation"], "parsed": p,
                                 "correct": " ".join(p.split()) == r["equation"]} for r, p in zip(data.test, predicted)])
            run.artifact(preds, "oracle")
            log.info("oracle ACC-eq on %d real test problems: %.3f", len(data.test), metrics["oracle_acc_eq"])
        record_training(run, name, metrics, loss_curve_csv(result["losses"]))
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=(*GENERATORS, EVALUATOR))
    train(params_or_exit(args.params), args.model, args.dataset, args.fold)
