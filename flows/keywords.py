"""Stage `keywords`: the two heuristic contexts of the paper's ablation baselines, for one (dataset, fold).

TF-IDF is fitted on the training fold only; noun keywords are NOUN + PROPN (see mwpgen/data/keywords.py for why not
"pronoun"). Written for every record of the fold, training and test alike.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from flows.common import DATA, fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.data.keywords import noun_keywords, tfidf_keywords
from mwpgen.io import write_json, write_jsonl
from tracking.runs import stage_run


@flow(name="keywords")
def keywords(params: Params, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    data = load_fold(DATA, dataset, fold)  # full fold: keywords are cheap, subsampling happens downstream
    with stage_run(f"keywords {dataset} fold {fold}", tags={"dataset": dataset, "fold": str(fold)}) as run:
        run.params({**params.keywords.model_dump(), "dataset": dataset, "fold": fold})
        train_texts = [r["text"] for r in data.train]
        rows = []
        for split, records in (("train", data.train), ("test", data.test)):
            texts = [r["text"] for r in records]
            tfidf = tfidf_keywords(texts, train_texts, k=params.keywords.tfidf_top_k)
            nouns = noun_keywords(texts)
            rows += [{"id": r["id"], "split": split, "tfidf": t, "noun": n} for r, t, n in zip(records, tfidf, nouns)]
        paths = fold_paths(None, dataset, fold)
        write_jsonl(paths.keywords, rows)
        stats = {"records": len(rows),
                 "avg_tfidf": sum(len(r["tfidf"]) for r in rows) / max(1, len(rows)),
                 "avg_noun": sum(len(r["noun"]) for r in rows) / max(1, len(rows))}
        log.info("%s fold %d: %d records, %.2f noun keywords on average", dataset, fold, len(rows), stats["avg_noun"])
        run.metrics(stats)
        run.artifact(paths.keywords)
        write_json(paths.keyword_stats, stats)
    return stats


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    run_stage(keywords, params_or_exit(args.params), args.dataset, args.fold,
              failed_metrics=[fold_paths(None, args.dataset, args.fold).keyword_stats])
