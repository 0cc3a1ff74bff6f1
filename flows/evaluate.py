"""Stage `evaluate`: score one generator's problems on one fold.

BLEU-4, METEOR and ROUGE-L against the real test problem (pycocoevalcap after its PTB tokenizer, one METEOR JVM); ACC-eq
= the evaluator mwp2eq (trained on this training fold's real problems only) parses each generated problem back into
exactly the input equation's symbols; % novel = generated problems whose normalised text is not in the training fold;
ACC-eq over novel problems only; Dist-3. ACC-eq (equivalent): the parse is symbolically the input equation. Consistency
(judged): the share of problems the rule judge accepts (mwpgen.judge.rule.judged: the evaluator's parse is the equation
and the problem passes a reader's surface checks), on every fold, as before there was a learned judge. Consistency
(learned): the share the fold's learned judge accepts (models/judge/<dataset>/fold<k>, stage train_judge: p(problem
encodes equation) at least its threshold, and where the judge is gated by the rule, the rule's verdict too), only where
train_judge adopted one; absent elsewhere, so no average mixes the two judges. How far each judge can be trusted: stages
train_judge (validation readings) and measure_judge (test readings). The per-problem predictions file also keeps each
problem's BLEU statistics (metrics.bleu_stats) and the judges' verdicts ("judged"; "judge_probability" and
"learned_judged" with a learned judge), from which the report recomputes the scores on the bootstrap resamples of its
paired comparisons."""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import DATA, fold_paths, params_or_exit, run_stage, stage_args, write_metrics
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.evaluation.metrics import TextScorer, score_generations
from mwpgen.io import read_generations, write_jsonl
from mwpgen.seq2seq.not_run import read_not_run
from tracking.runs import fold_run


@flow(name="evaluate")
def evaluate(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    exp = params.experiment
    # Novelty is judged against the whole training fold, not the training subsample.
    data = load_fold(DATA, dataset, fold, 0, exp.max_test_of(dataset), exp.seed)
    paths = fold_paths(model, dataset, fold)
    rows = read_generations(paths.generations)
    pred_path, out = paths.predictions, paths.scores
    reason = read_not_run(paths.model_dir)
    if reason:  # the report marks the row "not run" with this reason; no score is made up for it
        log.warning("%s on %s fold %d was not run: %s", model, dataset, fold, reason)
        write_jsonl(pred_path, [])
        write_metrics(out, paths.scores_timing,
                      {"model": model, "dataset": dataset, "fold": fold, "n": 0, "not_run": reason})
        return {"not_run": reason}
    # Here, not at the top: the parse and the judge import torch (~1 s), which a not-run row does without.
    from mwpgen.judge.rule import judge_predictions
    from mwpgen.judge.saved import has_judge
    from mwpgen.judge.verdicts import learned_judge_predictions
    from tasks.judge import judge_probabilities
    from tasks.parse import predict_equations

    with fold_run(model, dataset, fold, "evaluate") as run:
        # The METEOR JVM starts first: it loads its tables (~5 s) on the other core while the evaluator parses.
        with TextScorer(params.evaluate.meteor_timeout_s, params.evaluate.max_hypothesis_chars) as scorer:
            start = time.time()
            parsed = predict_equations(params, paths.evaluator.model_dir, [r["generated"] for r in rows])
            parse_s = time.time() - start
            scores, predictions = score_generations(rows, parsed, [r["text"] for r in data.train], scorer)
        scores["consistency_judged"] = judge_predictions(predictions)  # the rule, on every fold
        if has_judge(paths.judge):  # where train_judge adopted one (no_judge.json elsewhere)
            probabilities, info = judge_probabilities(params, paths.judge, [p["generated"] for p in predictions],
                                                      [p["equation"] for p in predictions])
            # a judge gated by the rule reads each prediction's "judged", just set
            scores["consistency_learned"] = learned_judge_predictions(predictions, probabilities, info)
        timings = scores.pop("timings_s")
        write_jsonl(pred_path, predictions)
        result = {"model": model, "dataset": dataset, "fold": fold, "n": len(rows), **scores,
                  "timings_s": {**{k: round(v, 3) for k, v in timings.items()}, "parse": round(parse_s, 3)}}
        timing = write_metrics(out, paths.scores_timing, result)  # the timings to timing/, out of `dvc metrics show`
        log.info("%s %s fold %d: BLEU-4 %.3f METEOR %.3f ROUGE-L %.3f ACC-eq %.3f (equivalent %.3f) judged %.3f "
                 "(learned judge: %s) novel %.3f", model, dataset, fold, scores["bleu4"], scores["meteor"],
                 scores["rouge_l"], scores["acc_eq"], scores["acc_eq_equivalent"], scores["consistency_judged"],
                 "none" if "consistency_learned" not in scores else f"{scores['consistency_learned']:.3f}",
                 scores["novelty"])
        run.metrics({k: v for k, v in scores.items() if isinstance(v, (int, float))})
        run.metrics({f"timing.{k}": v for k, v in timing.items()})
        run.artifact(out)
        run.artifact(pred_path, "predictions")
    return result


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=registry.generator_names())
    run_stage(evaluate, params_or_exit(args.params), args.model, args.dataset, args.fold)
