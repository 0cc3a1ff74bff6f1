"""The numbers behind the report's tables, with no text formatting (that is mwpgen/evaluation/tables.py).

Per-fold score files are aggregated into per-(model, dataset, metric) samples over the folds that ran. Every model
is also compared with a baseline on the same test problems: a paired bootstrap over the test problems gives a 95%
interval for the difference in BLEU-4 (corpus BLEU recomputed on each resample from the per-problem statistics the
evaluate stage stores), ACC-eq, ACC-eq (equivalent) and the judged consistency. Table 2 compares with GPT-pre (the
paper's closest baseline to ours: same LM, L_LM only), Table 4 with the full model. The paper reports averages only
(Sec. 4.1 "Quantitative Results"); the intervals say which of its differences a run of this size can resolve.

The summaries at the end are metrics/report.json, what `dvc metrics show/diff` reads.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from mwpgen import paper

BASELINE = "gpt_pre"  # Table 2's differences are against GPT-pre
FULL_MODEL = "ours"  # Table 4's are against the full model: what removing each part costs
BOOTSTRAP_RESAMPLES = 1000
DELTA_METRICS = ("bleu4", "acc_eq", "acc_eq_equivalent", "consistency_judged")
_PER_PROBLEM = ("acc_eq", "acc_eq_equivalent", "judged")  # the prediction records' 0/1 columns, DELTA_METRICS[1:]
# The evaluator's figures on real test problems (flows/train_evaluator.py): its own accuracy and the chance baseline.
REFERENCE_METRICS = ("oracle_acc_eq", "oracle_acc_eq_equivalent", "chance_acc_eq", "chance_acc_eq_equivalent")
# consistency_learned: the learned judge's share, present only on folds where train_judge adopted one, so its mean
# is over those folds alone (never mixed with the rule's consistency_judged)
SUMMARY_METRICS = ("bleu4", "meteor", "rouge_l", "acc_eq", "acc_eq_equivalent", "consistency_judged",
                   "consistency_learned", "novelty", "acc_eq_novel", "dist3")
_SMALL, _TINY = 1e-9, 1e-15  # pycocoevalcap's BleuScorer smoothing: no division by zero, 0 matches -> 0

Samples = dict[tuple[str, str, str], list[float]]  # (model, dataset, metric) -> one value per fold


def reported_datasets(listed: Sequence[str], scored: Iterable[str]) -> list[str]:
    """The tables' datasets, in the paper's order: those experiment.datasets lists, and those that runs of another
    profile have scored (`--profile mawps`, `--profile math23k`, then params.yaml back to its default)."""
    wanted = set(listed) | set(scored)
    return [d for d in paper.DATASETS if d in wanted]  # the params schema allows no other dataset


def observed_subsample(n_train: int, n_test: int, n_train_full: int, n_test_full: int) -> tuple[int, int] | None:
    """(training, test) problems (0 = all) for a dataset the current params.yaml does not list: the sizes its runs
    recorded against its whole fold's; None when both are whole."""
    sizes = (n_train if n_train < n_train_full else 0, n_test if n_test < n_test_full else 0)
    return sizes if any(sizes) else None


def aggregate(scores: Iterable[dict], metrics: Sequence[str]) -> Samples:
    """(model, dataset, metric) -> the per-fold values of each metric present (None = absent); the folds seen are
    recorded under metric "folds" and the test problems scored per fold under "n"."""
    samples: Samples = {}
    for s in scores:
        if s.get("not_run"):
            continue
        for metric in metrics:
            if s.get(metric) is not None:
                samples.setdefault((s["model"], s["dataset"], metric), []).append(float(s[metric]))
        samples.setdefault((s["model"], s["dataset"], "folds"), []).append(float(s["fold"]))
        if "n" in s:
            samples.setdefault((s["model"], s["dataset"], "n"), []).append(float(s["n"]))
    return samples


def mean(values: Sequence[float]) -> float:
    """The mean over the values that are numbers; NaN when there is none."""
    numbers = [v for v in values if not math.isnan(v)]
    return statistics.fmean(numbers) if numbers else math.nan


def not_run_reasons(scores: Iterable[dict]) -> dict[str, str]:
    """model -> why it did not run (e.g. no GloVe vectors offline), from score files marked not_run."""
    return {s["model"]: s["not_run"] for s in scores if s.get("not_run")}


def corpus_bleu(totals: np.ndarray | Sequence[int]) -> np.ndarray:
    """pycocoevalcap's corpus BLEU-4 from metrics.bleu_stats summed over the corpus (last axis: the 10 statistics),
    computed as BleuScorer.compute_score does: the geometric mean over n = 1..4 of (matches + 1e-15) / (n-grams +
    1e-9), times exp(1 - 1/ratio) where ratio = (hypothesis length + 1e-15) / (reference length + 1e-9) < 1."""
    totals = np.asarray(totals, dtype=np.float64)
    bleu = np.ones(totals.shape[:-1])
    for k in range(4):
        bleu = bleu * ((totals[..., k] + _TINY) / (totals[..., 4 + k] + _SMALL))
    bleu = bleu ** (1.0 / 4)
    ratio = (totals[..., 8] + _TINY) / (totals[..., 9] + _SMALL)
    return np.where(ratio < 1, bleu * np.exp(1 - 1 / ratio), bleu)


def _scores(sums: np.ndarray, n: int) -> np.ndarray:
    """Column sums of _paired's matrix over n problems (..., 13) -> (..., 4): DELTA_METRICS (BLEU-4, then the
    shares of the per-problem 0/1 columns)."""
    return np.concatenate([corpus_bleu(sums[..., :10])[..., None], sums[..., 10:] / n], axis=-1)


def _paired(model: Sequence[dict], base: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, int]:
    """One row per test problem both prediction files have (matched by id): bleu_stats, then _PER_PROBLEM; and how
    many problems only one of them has."""
    mine, theirs = {r["id"]: r for r in model}, {r["id"]: r for r in base}
    ids = [i for i in theirs if i in mine]

    def matrix(records: dict[str, dict]) -> np.ndarray:
        try:
            rows = [[*records[i]["bleu_stats"], *(records[i][k] for k in _PER_PROBLEM)] for i in ids]
        except KeyError as e:
            raise ValueError(f"prediction records without {e} (written before it was kept): re-run `evaluate`") from e
        return np.array(rows, dtype=np.float64).reshape(len(ids), 10 + len(_PER_PROBLEM))

    return matrix(mine), matrix(theirs), len(mine) + len(theirs) - 2 * len(ids)


def paired_bootstrap(runs: Sequence[tuple[Sequence[dict], Sequence[dict]]], seed: int) -> dict | None:
    """Model minus baseline over `runs` (one (model records, baseline records) pair of prediction files per fold):
    Δ = the mean over folds of the per-fold difference on the problems both have; its 95% interval = the 2.5/97.5
    percentiles of Δ over BOOTSTRAP_RESAMPLES resamples, each drawing every fold's problems with replacement, the
    same problems for both models (paired). BLEU-4 is corpus BLEU recomputed on each resample. None when no fold
    has a problem in common; ``unpaired`` counts the problems only one side has (compared on the intersection)."""
    rng = np.random.default_rng(seed)
    observed, resampled, n, unpaired = [], [], 0, 0
    for model, base in runs:
        a, b, missing = _paired(model, base)
        unpaired += missing
        m = len(a)
        if m == 0:
            continue
        weights = rng.multinomial(m, np.full(m, 1 / m), size=BOOTSTRAP_RESAMPLES).astype(np.float64)
        observed.append(_scores(a.sum(axis=0), m) - _scores(b.sum(axis=0), m))
        resampled.append(_scores(weights @ a, m) - _scores(weights @ b, m))  # integer sums: exact in float64
        n += m
    if not observed:
        return None
    delta = np.mean(observed, axis=0)  # one value per DELTA_METRICS
    low, high = np.percentile(np.mean(resampled, axis=0), [2.5, 97.5], axis=0)
    return {metric: {"mean": float(delta[i]), "low": float(low[i]), "high": float(high[i])}
            for i, metric in enumerate(DELTA_METRICS)} | {"n": n, "unpaired": unpaired}


def compare_runs(predictions: dict[tuple[str, str, int], list[dict]], runs: Iterable[tuple[str, str, int]],
                 seed: int, baseline: str = BASELINE) -> dict | None:
    """paired_bootstrap of the (model, dataset, fold) `runs` against `baseline`'s predictions on the same folds."""
    pairs = []
    for model, dataset, fold in sorted(runs):
        base = predictions.get((baseline, dataset, fold))
        if (model, dataset, fold) in predictions and base is not None:
            pairs.append((predictions[(model, dataset, fold)], base))
    return paired_bootstrap(pairs, seed)


def deltas_vs_gpt_pre(predictions: dict[tuple[str, str, int], list[dict]], seed: int) -> dict[tuple[str, str], dict]:
    """(model, dataset) -> compare_runs over every fold of that model (GPT-pre itself and incomparable models
    are left out). `predictions`: (model, dataset, fold) -> the evaluate stage's prediction records."""
    out = {}
    for model, dataset in sorted({(m, d) for m, d, _ in predictions if m != BASELINE}):
        delta = compare_runs(predictions, [r for r in predictions if r[:2] == (model, dataset)], seed)
        if delta:
            out[(model, dataset)] = delta
    return out


def ablation_runs(scores: list[dict], variant_of: Callable[[str], str | None],
                  rows_of: Callable[[str], Sequence[str]], datasets: Sequence[str], folds: Sequence[int],
                  predictions: dict[tuple[str, str, int], list[dict]] | None = None, seed: int = 0) -> dict[str, dict]:
    """Table 4's measured rows: label -> {"scores": the row's score records (model renamed to the label), "source":
    the models that ran it, "runs": "arit:0"-style fold labels, "deltas": {dataset: compare_runs against the full
    model}}, over the ablation's `datasets` x `folds` only (the full model may have run on more folds).
    `variant_of(model)` maps a score's model to its ablation variant (or None); `rows_of(variant)` gives the Table 4
    rows a variant answers; `predictions`: (model, dataset, fold) -> prediction records."""
    by_row: dict[str, list[dict]] = {}
    for s in scores:
        variant = variant_of(s["model"])
        if variant is not None and not s.get("not_run") and s["dataset"] in datasets and s["fold"] in folds:
            for label in rows_of(variant):
                by_row.setdefault(label, []).append(s | {"model": label, "source_model": s["model"]})
    out = {}
    for label, shown in by_row.items():
        deltas = {}
        for d in datasets:
            delta = compare_runs(predictions or {}, {(s["source_model"], d, s["fold"]) for s in shown
                                                     if s["dataset"] == d and s["source_model"] != FULL_MODEL},
                                 seed, baseline=FULL_MODEL)
            if delta:
                deltas[d] = delta
        out[label] = {"scores": shown, "source": sorted({s["source_model"] for s in shown}), "deltas": deltas,
                      "runs": sorted({f"{s['dataset'][:4]}:{s['fold']}" for s in shown})}
    return out


def _rounded_delta(d: dict) -> dict:
    """A paired_bootstrap result for `dvc metrics`: each metric's mean and interval to 4 places, n, unpaired."""
    return {**{m: {k: round(v, 4) for k, v in d[m].items()} for m in DELTA_METRICS}, "n": d["n"],
            "unpaired": d["unpaired"]}


def _means(samples: Samples) -> dict:
    """{model: {dataset: {metric: mean to 4 places}}} of the metrics that have a number (not folds, n)."""
    out: dict = {}
    for (model, dataset, metric), values in samples.items():
        if metric not in ("folds", "n") and not math.isnan(mean(values)):
            out.setdefault(model, {}).setdefault(dataset, {})[metric] = round(mean(values), 4)
    return out


def ablation_summary(runs: dict[str, dict]) -> dict:
    """Table 4 for `dvc metrics`: {row label: {dataset: {metric: mean, "delta_vs_full_model": {...}}}}."""
    out = _means(aggregate([s for r in runs.values() for s in r["scores"]], DELTA_METRICS))
    for label, row in runs.items():
        for dataset, d in row["deltas"].items():
            out.setdefault(label, {}).setdefault(dataset, {})["delta_vs_full_model"] = _rounded_delta(d)
    return out


def judge_summary(measured: dict | None, trained: dict | None = None) -> dict:
    """report.json's record of the judges' measurements (numbers only, for `dvc metrics`; empty without one): per part
    of data/labels/judge the rule's, ACC-eq's (and the learned judge's) precision and recall with their intervals;
    the learned judge on the validation readings that chose it (`trained`: stage train_judge; in-sample), beside the
    rule's figures there and whether it was adopted, and on every test reading beside the rule (measure_judge)."""
    out = {}
    if trained and "validation" in trained:
        v, versus = trained["validation"], trained.get("against_rule", {})
        out["learned_validation"] = {k: v[k] for k in ("n", "right", "auc", "precision_at_recall_0.5", "threshold",
                                                       "precision", "recall", "accepted") if v.get(k) is not None}
        out["learned_validation"] |= {k: versus[k] for k in ("rule_precision", "rule_recall")
                                      if versus.get(k) is not None}
        if "gated_by_rule" in trained:
            out["learned_validation"]["gated_by_rule"] = int(trained["gated_by_rule"])
        if "adopted" in trained:
            out["learned_validation"]["adopted"] = int(trained["adopted"])
    if not measured or not measured.get("n"):
        return out
    on = measured.get("learned_judge", {})
    if "learned" in on:
        out["learned_test"] = {"n": on["n"], "consistent": on["consistent"],
                               **{k: on["learned"][k] for k in ("auc", "precision_at_recall_0.5", "precision",
                                                                "recall", "accepted") if on["learned"][k] is not None},
                               "rule": {k: round(on["rule"][k], 4) for k in ("precision", "recall")
                                        if on["rule"][k] is not None}}

    def numbers(q: dict) -> dict:
        kept = {"accepted": q["accepted"]}
        for name in ("precision", "recall"):
            if q[name] is not None:
                kept[name] = round(q[name], 4)
                if q[f"{name}_ci"]:
                    kept[f"{name}_low"], kept[f"{name}_high"] = q[f"{name}_ci"]
        return kept

    return out | {part: {"n": measured[part]["n"], "consistent": measured[part]["consistent"],
                         **{verdict: numbers(measured[part][verdict]) for verdict in ("judge", "acc_eq", "learned")
                            if verdict in measured[part]}}
                  for part in ("validation", "test")}


def selection_summary(picks: Sequence[Sequence[str]], nouns: Sequence[Sequence[str]],
                      tfidf: Sequence[Sequence[str]]) -> dict:
    """What the selector picked over a fold's test problems: words per problem (median, mean), the share of
    problems with none, and the share of picked words that are among the same problem's noun keywords and among
    its TF-IDF top 5 (case-insensitive). The paper's Table 5 shows 2-8 words per problem."""
    counts = [len(p) for p in picks]
    picked = [(w.lower(), {x.lower() for x in n}, {x.lower() for x in t}) for p, n, t in zip(picks, nouns, tfidf)
              for w in p]

    def share(hits: int) -> float:
        return hits / len(picked) if picked else math.nan

    return {"problems": len(counts), "words_median": statistics.median(counts) if counts else math.nan,
            "words_mean": statistics.fmean(counts) if counts else math.nan,
            "none_share": sum(c == 0 for c in counts) / len(counts) if counts else math.nan,
            "in_nouns": share(sum(w in n for w, n, _ in picked)), "in_tfidf": share(sum(w in t for w, _, t in picked))}


def summary(scores: list[dict], oracle: list[dict], deltas: dict[tuple[str, str], dict] | None = None) -> dict:
    """Nested {model: {dataset: {metric: mean}}} for `dvc metrics show/diff`, with each model's
    ``delta_vs_gpt_pre`` ({metric: {mean, low, high}}, n, unpaired; from deltas_vs_gpt_pre), the evaluator's oracle
    figures under "evaluator" and the chance baseline under "chance"."""
    out = _means(aggregate(scores, SUMMARY_METRICS))
    for (_, dataset, metric), values in aggregate(oracle, REFERENCE_METRICS).items():
        if metric not in ("folds", "n"):
            owner, name = ("evaluator", metric) if metric.startswith("oracle_") else ("chance", metric[len("chance_"):])
            out.setdefault(owner, {}).setdefault(dataset, {})[name] = round(mean(values), 4)
    for (model, dataset), d in (deltas or {}).items():
        out.setdefault(model, {}).setdefault(dataset, {})["delta_vs_gpt_pre"] = _rounded_delta(d)
    return out
