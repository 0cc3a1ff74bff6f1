"""Stage `measure_judge`: how far the consistency judge can be trusted, measured against blind readings.

The judge (mwpgen.judge.judged, chosen on the development labels by studies/judge_choice/compare_judges.py)
accepts a generated problem when the fold's evaluator parses it into exactly its equation and the problem passes a
reader's surface checks. Its only trained part is that evaluator, trained on the fold's training problems alone. Here
it reads the fold's blind labels (data/labels/judge: generated problems a reader found right or not, never seeing a
parse or a verdict) and measures its precision and recall, with bootstrap intervals, per part: "dev" (validation
equations: what the judge was chosen on) and "test" (test equations: chose nothing). ACC-eq's own verdict (the parse
alone) is measured beside it. The report's notes quote the test part. A fold without labels writes that it has none.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import fold_paths, params_or_exit, run_stage, stage_args
from mwpgen.config.schema import Params
from mwpgen.evaluation.blind_labels import LABELLED_FOLD, PARTS, measurement_paths, read_labels, verdict_quality
from mwpgen.evaluation.metrics import equation_matches
from mwpgen.io import write_json, write_jsonl
from mwpgen.judge import JUDGE_RULE, judged
from mwpgen.paths import PROJECT_ROOT
from mwpgen.registry import EVALUATOR
from tasks.parse import predict_equations
from tracking.runs import fold_run

LABELS = PROJECT_ROOT / "data" / "labels" / "judge"


@flow(name="measure_judge")
def measure_judge(params: Params, dataset: str, fold: int) -> dict:
    metrics_path, verdicts_path = measurement_paths(PROJECT_ROOT, dataset, fold)
    if (dataset, fold) != LABELLED_FOLD:
        write_jsonl(verdicts_path, [])
        result = {"dataset": dataset, "fold": fold, "n": 0,
                  "no_labels": f"the blind labels (data/labels/judge) are of {LABELLED_FOLD[0]} fold {LABELLED_FOLD[1]}"}
        write_json(metrics_path, result)
        return result
    log = get_run_logger()
    cap = params.experiment.max_test_of(dataset)  # a measurement set: the smoke profile's cap applies to it too
    labelled = read_labels(LABELS)
    rows = [r for part in PARTS for r in [r for r in labelled if r["part"] == part][: cap or None]]
    with fold_run(EVALUATOR.name, dataset, fold, "measure_judge") as run:
        start = time.time()
        parsed = predict_equations(params, fold_paths(None, dataset, fold).evaluator.model_dir,
                                   [r["problem"] for r in rows])
        parse_s = time.time() - start
        matches = equation_matches(parsed, [r["equation"] for r in rows])  # ACC-eq's own verdict
        for r, parse, match in zip(rows, parsed, matches):
            r["parsed"], r["judged"], r["acc_eq"] = parse, judged(parse, r["equation"], r["problem"]), match
        result = {"dataset": dataset, "fold": fold, "judge": JUDGE_RULE, "n": len(rows), "labels": "data/labels/judge",
                  "parse_s": round(parse_s, 1)}
        seed = params.experiment.seed
        for part in PARTS:
            of = [r for r in rows if r["part"] == part]
            result[part] = {"n": len(of), "consistent": sum(r["label"] for r in of),
                            "judge": verdict_quality([r["judged"] for r in of], [r["label"] for r in of], seed),
                            "acc_eq": verdict_quality([r["acc_eq"] for r in of], [r["label"] for r in of], seed)}
            for verdict in ("judge", "acc_eq"):
                run.metrics({f"{part}_{verdict}_{k}": v for k, v in result[part][verdict].items()
                             if k in ("precision", "recall") and v is not None})
        write_jsonl(verdicts_path, [{k: r[k] for k in ("uid", "part", "label", "parsed", "acc_eq", "judged")}
                                    for r in rows])
        write_json(metrics_path, result)
        run.artifact(metrics_path)
        run.artifact(verdicts_path, "verdicts")
        test = result["test"]["judge"]
        log.info("judge on %s fold %d, %d test labels: precision %s recall %s", dataset, fold, result["test"]["n"],
                 test["precision"], test["recall"])
    return result


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True)
    run_stage(measure_judge, params_or_exit(args.params), args.dataset, args.fold)
