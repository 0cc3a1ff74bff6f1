"""Stage `train_seq2seq`: train one seq2seq baseline of the paper's Tables 2-3 on one (dataset, fold).

- `seq2seq_rnn`: 2-layer LSTM encoder-decoder with attention (OpenNMT-py's default RNN, as the paper ran it);
- `seq2seq_rnn_glove`: the same with GloVe 300d word embeddings; without GloVe vectors (offline, no local
  file) the stage writes models/<model>/<dataset>/fold<k>/NOT_RUN.json with the reason and exits 0, so the
  row is reported as not run rather than silently trained without GloVe;
- `seq2seq_tf`: transformer encoder-decoder with the Noam schedule.

Input = equation + <sep> + the noun keywords of `params.keywords.baseline_context` (keyword dropout during
training), output = the problem text; trained from scratch on every training record of the fold, vocabularies
from that fold only. Sizes and steps: `params.train.seq2seq` (profiles/paper.yaml holds the paper's).
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.common import (
    DATA,
    fold_keywords,
    fold_paths,
    params_or_exit,
    record_training,
    run_stage,
    stage_args,
    write_metrics,
)
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.io import atomic_write_text
from mwpgen.seq2seq.not_run import NOT_RUN_FILE, write_not_run
from mwpgen.training_metrics import curve_csv, log_metrics, training_metrics
from tasks.train_seq2seq import train_seq2seq_baseline
from tracking.runs import fold_run


@flow(name="train_seq2seq")
def train_seq2seq(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    exp, cfg = params.experiment, params.train.seq2seq
    data = load_fold(DATA, dataset, fold, registry.max_train(params, model, dataset), exp.max_test_of(dataset),
                     exp.seed, validation_size=exp.validation_size)
    paths = fold_paths(model, dataset, fold)
    checkpoint, out = paths.model_dir, paths.train_metrics
    context = params.keywords.baseline_context
    keywords = fold_keywords(paths, context, "train")
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"kind": "seq2seq", "n_train": len(data.train), "n_train_full": data.n_train_full,
                    "context": context, "keyword_dropout": params.keywords.dropout, "seed": exp.seed,
                    **{f"train.seq2seq.{k}": v for k, v in cfg.model_dump().items()}})
        log.info("training %s on %s fold %d: %d examples", model, dataset, fold, len(data.train))
        result = train_seq2seq_baseline(
            params, model, dataset, data.train, keywords, paths, data.validation,
            on_log=lambda rec: run.metrics(log_metrics(rec), step=rec["step"]))
        if result["not_run"]:
            log.warning("%s on %s fold %d NOT RUN: %s", model, dataset, fold, result["not_run"])
            write_not_run(checkpoint, result["not_run"])
            write_metrics(out, paths.train_timing, {"not_run": result["not_run"]})
            atomic_write_text(paths.train_curve, curve_csv([], []))  # DVC's output
            run.tag("mwpgen.not_run", result["not_run"][:5000])
            run.artifact(checkpoint / NOT_RUN_FILE)
            run.artifact(out)
            return {"not_run": result["not_run"]}
        train = result["train"]
        setup = result["setup"]
        metrics = training_metrics(
            train, {"epochs": train["epochs"], "tokens": train["tokens"], "n_train": result["n_train"],
                    "n_validation": len(data.validation), "src_vocab_size": result["src_vocab_size"],
                    "tgt_vocab_size": result["tgt_vocab_size"], "n_params": result["n_params"],
                    "model": {k: v for k, v in setup["model"].items() if k not in ("src_vocab_size", "tgt_vocab_size")},
                    "train": setup["train"]},
            {"tokens_per_s": round(train["timing"]["tokens_per_s"], 1)})
        if result["glove"] is not None:
            metrics["glove"] = result["glove"]
        run.params({f"run.model.{k}": v for k, v in metrics["model"].items()}
                   | {f"run.train.{k}": v for k, v in metrics["train"].items()})
        record_training(run, paths, metrics, curve_csv(train["history"], train["validations"]))
        for v in train["validations"]:
            run.metrics({"val_loss": v["val_loss"]}, step=v["step"])
        if result["glove"] is not None:
            run.metrics({f"glove_{k}": v for k, v in result["glove"].items() if isinstance(v, (int, float))})
        run.artifact(checkpoint / "config.json", "checkpoint")
    log.info("%s on %s fold %d: %d steps in %.1f s, final training loss %.3f", model, dataset, fold, metrics["steps"],
             metrics["timing"]["wall_s"], metrics["final_train_loss"])
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=registry.names("seq2seq"))
    run_stage(train_seq2seq, params_or_exit(args.params), args.model, args.dataset, args.fold)
