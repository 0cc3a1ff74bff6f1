"""Stage `measure_judge`: how far the consistency judge can be trusted, measured against blind readings.

The judge (mwpgen.judge.rule.judged, chosen on the validation labels by studies/judge_choice/compare_judges.py)
accepts a generated problem when the fold's evaluator parses it into exactly its equation and the problem passes a
reader's surface checks. Its only trained part is that evaluator, trained on the fold's training problems alone. Here
it reads the fold's blind labels (data/labels/judge: generated problems a reader found right or not, never seeing a
parse or a verdict) and measures its precision and recall, with bootstrap intervals, per part: "validation"
(validation equations: what the judge was chosen on) and "test" (test equations: chose nothing). ACC-eq's own verdict
(the parse alone) is measured beside it. The report's notes quote the test part. A fold without labels writes that it
has none.

The fold's learned judge (stage train_judge, models/judge/<dataset>/fold<k>) is measured beside the rule: on the same
parts of data/labels/judge, and on every blind reading of a test equation the project holds (mwpgen/judge/readings.py:
data/labels/judge's test part, verify_pools' test pools, read_models, verify_judge; none of them fitted or chose it):
its AUC, precision at recall 0.5 and precision and recall at its threshold (with bootstrap intervals; a judge gated by
the rule gets the rule's verdicts, as evaluate gives them), the rule's verdicts on those same readings, and "verified:
yes" by the per-shape thresholds `mwpgen generate --verify` uses (mwpgen/judge/verified.py; the rule read through the
evaluator), overall and per equation shape. A fold where
train_judge adopted no judge records why (its no_judge.json).

Every bootstrap interval resamples dataset problems (each reading's `group`), each with all its readings: the
candidates of one problem share most of their text, so they are not independent draws.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.data.equation_shapes import SHAPES, equation_shape
from mwpgen.evaluation.metrics import equation_matches
from mwpgen.io import write_json, write_jsonl
from mwpgen.judge.measure import measure, verdict_quality
from mwpgen.judge.readings import LABELLED_FOLD, reading_set, readings
from mwpgen.judge.rule import JUDGE_RULE, judged
from mwpgen.judge.saved import JudgeInfo, has_judge, no_judge_reason
from mwpgen.judge.verdicts import accepts, gated_scores, verifies
from mwpgen.paths import PROJECT_ROOT
from mwpgen.registry import EVALUATOR
from tasks.judge import judge_probabilities
from tasks.parse import predict_equations
from tracking.runs import fold_run

JUDGE_SET = "judge"  # data/labels/judge: the readings the rule is measured on, per part
MEASURED_PARTS = ("validation", "test")  # its parts (it holds no train readings)


@flow(name="measure_judge")
def measure_judge(params: Params, dataset: str, fold: int) -> dict:
    paths = fold_paths(None, dataset, fold)
    metrics_path, verdicts_path = paths.judge_measurement, paths.judge_verdicts
    if (dataset, fold) != LABELLED_FOLD:
        write_jsonl(verdicts_path, [])
        result = {
            "dataset": dataset,
            "fold": fold,
            "n": 0,
            "no_labels": f"the blind labels (data/labels/judge) are of {LABELLED_FOLD[0]} fold {LABELLED_FOLD[1]}",
        }
        write_json(metrics_path, result)
        return result
    log = get_run_logger()
    cap = params.experiment.max_test_of(dataset)  # a measurement set: the smoke profile's cap applies to it too
    labelled = reading_set(JUDGE_SET).read(PROJECT_ROOT)
    rows = [r for part in MEASURED_PARTS for r in [r for r in labelled if r["part"] == part][: cap or None]]
    judge_dir = paths.judge
    learned = has_judge(judge_dir)
    # every reading of a test equation: what the learned judge is measured on
    conflicts: list[str] = []  # readings of one text that disagree: the first kept, and said
    tests = readings(PROJECT_ROOT, on_conflict=conflicts.append)["test"][: cap or None] if learned else []
    for line in conflicts:
        log.warning("readings disagree: %s", line)
    with fold_run(EVALUATOR.name, dataset, fold, "measure_judge") as run:
        start = time.time()
        texts = list(dict.fromkeys(r["problem"] for r in rows + tests))  # each text parsed once
        parse_of = dict(zip(texts, predict_equations(params, paths.evaluator.model_dir, texts)))
        parse_s = time.time() - start
        parsed = [parse_of[r["problem"]] for r in rows]
        matches = equation_matches(parsed, [r["equation"] for r in rows])  # ACC-eq's own verdict
        for r, parse, match in zip(rows, parsed, matches):
            r["parsed"], r["judged"], r["acc_eq"] = parse, judged(parse, r["equation"], r["problem"]), match
        result = {"dataset": dataset, "fold": fold, "judge": JUDGE_RULE, "n": len(rows), "labels": "data/labels/judge",
                  "parse_s": round(parse_s, 1)}
        seed = params.experiment.seed
        info, probability_of = None, {}
        if learned:
            pairs = list(dict.fromkeys((r["problem"], r["equation"]) for r in rows + tests))
            probabilities, info = judge_probabilities(params, judge_dir, [p for p, _ in pairs], [e for _, e in pairs])
            probability_of = dict(zip(pairs, probabilities))
            for r in rows:
                r["judge_probability"] = round(probability_of[(r["problem"], r["equation"])], 4)
                r["learned_judged"] = accepts(info, probability_of[(r["problem"], r["equation"])], r["judged"])
        # name in the result -> the verdict of each row: the rule, ACC-eq's, and the learned judge's where it exists
        verdicts = {"judge": "judged", "acc_eq": "acc_eq", **({"learned": "learned_judged"} if learned else {})}
        for part in MEASURED_PARTS:
            of = [r for r in rows if r["part"] == part]
            labels = [r["label"] for r in of]
            result[part] = {"n": len(of), "consistent": sum(labels),
                            **{name: verdict_quality([r[key] for r in of], labels, seed,
                                                     groups=[r["group"] for r in of])
                               for name, key in verdicts.items()}}
            for verdict in verdicts:
                run.metrics({f"{part}_{verdict}_{k}": v for k, v in result[part][verdict].items()
                             if k in ("precision", "recall") and v is not None})
        result["learned_judge"] = {**learned_on_tests(info, tests, parse_of, probability_of, seed),
                                   "label_conflicts": conflicts} if learned else \
            {"no_judge": no_judge_reason(judge_dir)}
        for name in ("learned", "rule", "verified"):
            figures = result["learned_judge"].get(name, {})
            run.metrics({f"test_readings_{name}_{k}": v for k, v in figures.get("all", figures).items()
                         if k in ("auc", "precision_at_recall_0.5", "precision", "recall") and v is not None})
        columns = ("uid", "part", "label", "parsed", "acc_eq", "judged") + \
            (("judge_probability", "learned_judged") if learned else ())
        write_jsonl(verdicts_path, [{k: r[k] for k in columns} for r in rows])
        write_json(metrics_path, result)
        run.artifact(metrics_path)
        run.artifact(verdicts_path, "verdicts")
        test = result["test"]["judge"]
        log.info("judge on %s fold %d, %d test labels: precision %s recall %s", dataset, fold, result["test"]["n"],
                 test["precision"], test["recall"])
        if learned:
            on = result["learned_judge"]
            log.info("learned judge on %d test readings: AUC %s, precision %s at recall %s (the rule: %s at %s)",
                     on["n"], on["learned"]["auc"], on["learned"]["precision"], on["learned"]["recall"],
                     on["rule"]["precision"], on["rule"]["recall"])
    return result


def learned_on_tests(info: JudgeInfo, tests: list[dict], parse_of: dict, probability_of: dict, seed: int) -> dict:
    """The learned judge (`info`: what it is) and the rule on every test reading: AUC, precision at recall 0.5 (of p,
    or for a judge gated by the rule of verdicts.gated_scores), precision and recall of its verdicts with
    bootstrap intervals over the dataset problems; the rule's verdicts on the same readings."""
    labels, groups = [r["label"] for r in tests], [r["group"] for r in tests]
    p = [probability_of[(r["problem"], r["equation"])] for r in tests]
    rule = [judged(parse_of[r["problem"]], r["equation"], r["problem"]) for r in tests]
    scores = gated_scores(p, rule) if info.gated_by_rule else p
    # The ranking's figures from the scores; precision and recall from the verdicts the product gives (one source).
    ranking = measure(scores, labels, info.threshold)
    quality = verdict_quality([accepts(info, q, v) for q, v in zip(p, rule)], labels, seed, groups=groups)
    gate = "gated by the rule, " if info.gated_by_rule else ""
    return {"judge": f"{info.backbone}, layer {info.layer}, {gate}threshold {info.threshold:.3f}",
            "labels": sorted({r["source"] for r in tests}), "n": len(tests), "consistent": sum(labels),
            "problems": len({r["group"] for r in tests}),
            "learned": {**{k: ranking[k] for k in ("n", "right", "auc", "precision_at_recall_0.5", "threshold")},
                        **{k: None if quality[k] is None else round(quality[k], 4) for k in ("precision", "recall")},
                        **{k: quality[k] for k in ("accepted", "precision_ci", "recall_ci", "tp", "fp", "fn")}},
            "rule": {**verdict_quality(rule, labels, seed, groups=groups),
                     "auc": measure([float(v) for v in rule], labels, 0.5)["auc"]},
            "verified": verified_on_tests(info, tests, p, rule, seed)}


def verified_on_tests(info: JudgeInfo, tests: list[dict], p: list[float], rule: list[bool], seed: int) -> dict:
    """"verified: yes" by the product's verdict (verdicts.verifies: the thresholds of mwpgen/judge/verified.py) on
    every test reading: its precision and recall with bootstrap intervals over the dataset problems, overall and per
    equation shape, beside the target it was chosen for on validation. A gated judge's rule reads through the fold's
    evaluator here (`rule`), as when the thresholds were chosen; `mwpgen generate` reads through ours' co-trained
    parser, so its own verdicts are measured by reading its problems (studies/verify_k)."""
    verdicts = [verifies(info, q, v, r["equation"]) for q, v, r in zip(p, rule, tests)]
    shapes = [equation_shape(r["equation"]) for r in tests]

    def quality(rows: list[int]) -> dict:
        labels = [tests[i]["label"] for i in rows]
        figures = verdict_quality([verdicts[i] for i in rows], labels, seed, groups=[tests[i]["group"] for i in rows])
        return {"n": len(rows), "right": sum(labels), **{k: figures[k] for k in (
            "accepted", "tp", "precision", "precision_ci", "recall", "recall_ci")}}

    return {"precision_target": info.verified.get("precision_target"), "thresholds": info.verified.get("thresholds"),
            "all": quality(list(range(len(tests)))),
            "shapes": {shape: quality([i for i, s in enumerate(shapes) if s == shape])
                       for shape in SHAPES if shape in shapes}}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    run_stage(measure_judge, params_or_exit(args.params), args.dataset, args.fold)
