"""Which consistency judge to trust: candidates compared on the blind validation labels, the chosen one measured
once on the test labels (data/labels/judge).

    bash scripts/run.sh python -m studies.judge_choice.compare_judges models/evaluator/arithmetic/fold0 \
        --out studies/judge_choice

Every candidate is a verdict on (equation, problem): the evaluator's greedy parse (ACC-eq's own verdict), the
reader's surface checks, the evaluator's margin of the requested equation over its best other beam, and logistic
regressions over these features (mwpgen/judge/rule.py). Fitted candidates are scored on the validation labels by 5-fold
cross-validation (each fold's threshold chosen on the other four for precision >= TARGET); the candidate with the most
recall at that precision is then fitted on all validation labels and measured on the test labels, which choose
nothing. Features are cached in OUT/features.jsonl (they cost a beam search per problem).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from pathlib import Path

from mwpgen.io import read_jsonl, write_json, write_jsonl
from mwpgen.judge.measure import auc, precision_at_recall
from studies.judge_choice import candidates as judge
from studies.reading import judge_labels

ROOT = Path(__file__).resolve().parents[2]

TARGET = 0.85  # precision the judge must reach (issue 23), at recall >= 0.5
FOLDS = 5
SEED = 2021

# name -> (features the logistic regression reads) or a fixed rule over Features
RULES = {
    "evaluator parse = E (ACC-eq)": lambda f: f.exact,
    "evaluator parse equivalent to E": lambda f: f.equivalent,
    "surface checks (numbers once, none extra, a question)": lambda f: f.numbers_once and not f.extra_numbers
    and f.question,
    "parse = E and surface checks": lambda f: f.exact and f.numbers_once and not f.extra_numbers and f.question,
    "parse = E, surface checks and operation words": lambda f: f.exact and f.numbers_once and not f.extra_numbers
    and f.question and f.operation_words,
}
FITTED = {
    "margin (threshold)": ("margin",),
    "margin + log p per token": ("margin", "logp_per_token"),
    "margin + surface checks": ("margin", "numbers_once", "extra_numbers", "question"),
    "margin + surface checks + operation words": ("margin", "numbers_once", "extra_numbers", "question",
                                                  "operation_words"),
    "all evaluator features": judge.EVALUATOR_FEATURES,
}
WITH_CLASSIFIER = {  # candidates that read the consistency classifier (--classifier)
    "consistency classifier (threshold)": ("classifier",),
    "classifier + margin + surface checks": ("classifier", "margin", "numbers_once", "extra_numbers", "question"),
    "all features": judge.FEATURE_NAMES,
}


# --second-parser: a second, independently trained parser (studies/judge_choice/gpu_second_parser.py). Its candidates
# are rules and fits above, read over features merged from both parsers: the second parser's own, or "both" (each greedy
# parse is E, and the lower of the two margins: both parsers must believe E).
MERGES = {
    "second parser": lambda f, s: dataclasses.replace(
        f, margin=s.margin, logp_per_token=s.logp_per_token, exact=s.exact, equivalent=s.equivalent
    ),
    "both parsers": lambda f, s: dataclasses.replace(
        f,
        margin=min(f.margin, s.margin),
        logp_per_token=min(f.logp_per_token, s.logp_per_token),
        exact=f.exact and s.exact,
        equivalent=f.equivalent and s.equivalent,
    ),
}
MERGED = ("evaluator parse = E (ACC-eq)", "parse = E, surface checks and operation words", "margin (threshold)",
          "margin + surface checks + operation words")


def _features(have: dict[str, dict], rows: list[dict]) -> list[judge.Features]:
    """uid -> feature record, as the labelled rows' Features (in their order)."""
    return [judge.Features(**{k: have[r["uid"]].get(k) for k in judge.FEATURE_NAMES}) for r in rows]


def second_parser_features(path: Path, rows: list[dict]) -> list[judge.Features]:
    have = {r["uid"]: r for r in read_jsonl(path)}
    missing = [r["uid"] for r in rows if r["uid"] not in have]
    if missing:
        raise SystemExit(f"error: {path} has no features for {len(missing)} labelled problems (first: {missing[0]})")
    return _features(have, rows)


def cached_features(model_dir: Path, rows: list[dict], out: Path, classifier: Path | None) -> list[judge.Features]:
    """The evaluator's features of every labelled problem (cached: a beam search each), with the classifier's
    probability added when one is given."""
    from mwpgen.lm.loading import load_trained

    cache = out / "features.jsonl"
    have = {r["uid"]: r for r in read_jsonl(cache)} if cache.exists() else {}
    if not all(r["uid"] in have for r in rows):
        model, tokenizer = load_trained(model_dir, "cpu")
        start = time.perf_counter()
        feats = judge.features(model, tokenizer, [r["problem"] for r in rows], [r["equation"] for r in rows])
        print(f"features of {len(rows)} problems: {time.perf_counter() - start:.0f} s", flush=True)
        have = {r["uid"]: {"uid": r["uid"], **vars(f)} for r, f in zip(rows, feats)}
    if classifier is not None and not all(have[r["uid"]].get("classifier") is not None for r in rows):
        model, tokenizer = load_trained(classifier, "cpu")
        probs = judge.classifier_probabilities(model, tokenizer, [r["problem"] for r in rows],
                                               [r["equation"] for r in rows])
        for r, p in zip(rows, probs):
            have[r["uid"]]["classifier"] = p
    for r in rows:  # the text-only checks are recomputed, not cached: they cost nothing and may have been extended
        have[r["uid"]] |= judge.surface_checks(r["equation"], r["problem"])
    write_jsonl(cache, [have[r["uid"]] for r in rows])
    return _features(have, rows)


def cross_validated(use, feats, labels) -> tuple[list[bool], list[float]]:
    """Each validation problem's verdict and probability from a judge fitted, and thresholded, on the other folds."""
    order = list(range(len(labels)))
    random.Random(SEED).shuffle(order)
    verdict = [False] * len(labels)
    prob = [0.0] * len(labels)
    for k in range(FOLDS):
        held = order[k::FOLDS]
        held_set = set(held)
        train = [i for i in order if i not in held_set]
        model = judge.fit([feats[i] for i in train], [labels[i] for i in train], use)
        probs = model.probability([feats[i] for i in train])
        model.threshold = judge.threshold_for_precision(probs, [labels[i] for i in train], TARGET)
        for i, ok, p in zip(held, model.accepts([feats[i] for i in held]), model.probability([feats[i] for i in held])):
            verdict[i], prob[i] = ok, p
    return verdict, prob


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("evaluator", type=Path, help="the fold's evaluator (models/evaluator/<dataset>/fold<k>)")
    cli.add_argument("--classifier", type=Path,
                     help="a consistency classifier (studies/judge_choice/train_judge_classifier.py)")
    cli.add_argument("--second-parser", type=Path,
                     help="a second parser's features of the labelled problems "
                          "(studies/judge_choice/gpu_second_parser.py)")
    cli.add_argument("--out", type=Path, default=ROOT / "studies" / "judge_choice")
    args = cli.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = judge_labels.labels()
    feats = cached_features(args.evaluator, rows, args.out, args.classifier)
    fitted = FITTED | (WITH_CLASSIFIER if args.classifier else {})
    # (name, features of every labelled problem, the rule or the fitted judge's features)
    candidates = [(name, feats, rule) for name, rule in RULES.items()] + [(name, feats, use)
                                                                         for name, use in fitted.items()]
    if args.second_parser:
        second = second_parser_features(args.second_parser, rows)
        for merge, combine in MERGES.items():
            merged = [combine(f, s) for f, s in zip(feats, second)]
            candidates += [(f"{merge}: {name}", merged, (RULES | FITTED)[name]) for name in MERGED]
    validation = [i for i, r in enumerate(rows) if r["part"] == "validation"]
    test = [i for i, r in enumerate(rows) if r["part"] == "test"]
    y = [r["label"] for r in rows]
    val_y = [y[i] for i in validation]

    table = []
    for name, cand_feats, judge_of in candidates:
        val_f = [cand_feats[i] for i in validation]
        if callable(judge_of):
            table.append({"judge": name, "kind": "rule", **judge.precision_recall([judge_of(f) for f in val_f], val_y)})
        else:
            verdict, prob = cross_validated(judge_of, val_f, val_y)
            table.append({"judge": name, "kind": f"fitted ({FOLDS}-fold CV)", **judge.precision_recall(verdict, val_y),
                          "auc": auc(prob, val_y), "precision_at_recall_0.5": precision_at_recall(prob, val_y)})
    # The most recall among those at the target precision; if none reaches it, the most precise at recall >= 0.5.
    eligible = [
        t for t in table if t["precision"] == t["precision"] and t["precision"] >= TARGET and t["recall"] >= 0.5
    ]
    fallback = [t for t in table if t["recall"] >= 0.5 and t["precision"] == t["precision"]]
    chosen = (
        max(eligible, key=lambda t: (t["recall"], t["precision"]))
        if eligible
        else max(fallback or table, key=lambda t: (t["precision"] == t["precision"], t["precision"], t["recall"]))
    )

    _, chosen_feats, judge_of = next(c for c in candidates if c[0] == chosen["judge"])
    if callable(judge_of):
        test_verdict = [judge_of(chosen_feats[i]) for i in test]
    else:
        final = judge.fit([chosen_feats[i] for i in validation], val_y, judge_of)
        final.threshold = judge.threshold_for_precision(final.probability([chosen_feats[i] for i in validation]),
                                                        val_y, TARGET)
        test_verdict = final.accepts([chosen_feats[i] for i in test])
        write_json(args.out / "judge.json", final.to_dict())
    test_result = judge.precision_recall(test_verdict, [y[i] for i in test])
    acc_eq_test = judge.precision_recall([feats[i].exact for i in test], [y[i] for i in test])

    summary = {"evaluator": str(args.evaluator), "classifier": str(args.classifier) if args.classifier else None,
               "second_parser": str(args.second_parser) if args.second_parser else None,
               "target_precision": TARGET, "validation": len(validation), "validation_consistent":
               sum(val_y), "test": len(test), "test_consistent": sum(y[i] for i in test), "candidates": table,
               "chosen": chosen["judge"], "test_result": test_result, "acc_eq_verdict_on_test": acc_eq_test}
    write_json(args.out / "judge_choice.json", summary)
    lines = [f"### Consistency judges on the blind labels (evaluator {args.evaluator}"
             + (f", classifier {args.classifier}" if args.classifier else "")
             + (f", second parser {args.second_parser})" if args.second_parser else ")"), "",
             f"Validation labels: {len(validation)} problems ({sum(val_y)} consistent). "
             f"Target: precision >= {TARGET} "
             "at recall >= 0.5. Fitted judges: the verdict at the threshold chosen for that precision on the other "
             "folds (none accepted: no threshold reached it), and, from their cross-validated probabilities, the AUC "
             "and the best precision at recall 0.5.", "",
             "| judge | kind | precision | recall | accepted | AUC | precision at recall 0.5 |",
             "|---|---|---:|---:|---:|---:|---:|"]
    cell = lambda t, k: f"{t[k]:.3f}" if k in t else ""  # noqa: E731 — a one-line local helper
    lines += [f"| {t['judge']} | {t['kind']} | {t['precision']:.3f} | {t['recall']:.3f} | {t['accepted']} | "
              f"{cell(t, 'auc')} | {cell(t, 'precision_at_recall_0.5')} |" for t in table]
    lines += [
        "",
        (
            ""
            if eligible
            else f"No candidate reaches precision {TARGET} on the validation labels; the most "
            "precise at recall >= 0.5 is measured. "
        )
        + f"Chosen on the validation labels: **{chosen['judge']}**. On the {len(test)} test labels "
        f"({sum(y[i] for i in test)} consistent), which chose nothing: precision {test_result['precision']:.3f}, "
        f"recall {test_result['recall']:.3f} ({test_result['accepted']} accepted); the evaluator's ACC-eq verdict "
        f"there: precision {acc_eq_test['precision']:.3f}, recall {acc_eq_test['recall']:.3f}.",
    ]
    (args.out / "judge_choice.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
