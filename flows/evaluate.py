"""Stage `evaluate`: score one generator's problems on one fold.

BLEU-4, METEOR and ROUGE-L against the real test problem (pycocoevalcap after its PTB tokenizer, one METEOR JVM);
ACC-eq = the evaluator mwp2eq (trained on this training fold's real problems only) parses each generated problem
back into exactly the input equation's symbols; % novel = generated problems whose normalised text is not in the
training fold; ACC-eq over novel problems only; Dist-3.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import DATA, EVALUATOR, PROJECT_ROOT, all_models, fold_name, params_or_exit, stage_args
from mwpgen.config import Params
from mwpgen.data.folds import load_fold
from mwpgen.io import read_generations, write_json, write_jsonl
from mwpgen.seq2seq.baseline import read_not_run
from mwpgen.data.masking import split_text
from mwpgen.evaluation.metrics import TextScorer, equation_symbols, evaluate_generations, novelty
from tasks.models import parse
from tasks.tracking import fold_run


@flow(name="evaluate")
def evaluate(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    exp = params.experiment
    # Novelty is judged against the whole training fold, not the training subsample.
    data = load_fold(DATA, dataset, fold, 0, exp.max_test, exp.seed)
    name = fold_name(model, dataset, fold)
    rows = read_generations(PROJECT_ROOT / "results" / "generations" / f"{name}.csv")
    pred_path = PROJECT_ROOT / "results" / "predictions" / f"{name}.jsonl"
    out = PROJECT_ROOT / "results" / "scores" / f"{name}.json"
    reason = read_not_run(PROJECT_ROOT / "models" / name)
    if reason:  # the report marks the row "not run" with this reason; no score is made up for it
        log.warning("%s on %s fold %d was not run: %s", model, dataset, fold, reason)
        write_jsonl(pred_path, [])
        write_json(out, {"model": model, "dataset": dataset, "fold": fold, "n": 0, "not_run": reason})
        return {"not_run": reason}
    with fold_run(model, dataset, fold, "evaluate") as run:
        start = time.time()
        generated = [r["generated"] for r in rows]
        parsed = parse(params, PROJECT_ROOT / "models" / fold_name(EVALUATOR, dataset, fold), generated)
        parse_s = time.time() - start
        # Generated text is compared with the processed (punctuation-split) training texts in the same tokenisation.
        tokenised = [" ".join(split_text(g)) for g in generated]
        with TextScorer(params.evaluate.meteor_timeout_s, params.evaluate.max_hypothesis_chars) as scorer:
            scores = evaluate_generations(
                tokenised, [r["reference"] for r in rows], training_texts=[r["text"] for r in data.train],
                predicted_equations=parsed, reference_equations=[r["equation"] for r in rows], per_item=True,
                scorer=scorer)
        timings = scores.pop("timings_s")
        per_item = {k: scores.pop(k) for k in list(scores) if k.endswith("_per_item")}
        _, novel = novelty(tokenised, [r["text"] for r in data.train])  # per-item flags for the predictions file
        predictions = [{"id": r["id"], "equation": r["equation"], "generated": r["generated"], "parsed": p,
                        "acc_eq": equation_symbols(p) == equation_symbols(r["equation"]), "novel": n,
                        "bleu4": b, "meteor": m, "rouge_l": rl}
                       for r, p, n, b, m, rl in zip(rows, parsed, novel, per_item.get("bleu4_per_item", []),
                                                    per_item.get("meteor_per_item", []),
                                                    per_item.get("rouge_l_per_item", []))]
        write_jsonl(pred_path, predictions)
        result = {"model": model, "dataset": dataset, "fold": fold, "n": len(rows), **scores,
                  "timings_s": {**{k: round(v, 3) for k, v in timings.items()}, "parse": round(parse_s, 3)}}
        write_json(out, result)
        log.info("%s %s fold %d: BLEU-4 %.3f METEOR %.3f ROUGE-L %.3f ACC-eq %.3f novel %.3f", model, dataset, fold,
                 scores["bleu4"], scores["meteor"], scores["rouge_l"], scores["acc_eq"], scores["novelty"])
        run.metrics({k: v for k, v in scores.items() if isinstance(v, (int, float))})
        run.artifact(out)
        run.artifact(pred_path, "predictions")
    return result


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=all_models())
    evaluate(params_or_exit(args.params), args.model, args.dataset, args.fold)
