"""The paper's result tables from per-fold score files: mean ± std over the folds that ran, with the paper's
reported figures alongside, as Markdown, CSV and LaTeX.

Rows = models; columns = dataset x metric. A cell is empty where that model/dataset did not run; a row's
"folds" column says which folds it averages, so a partial run is never mistaken for the full protocol.

Every model is also compared with GPT-pre on the same test problems (the Δ columns of Tables 2 and 4): a paired
bootstrap over the test problems gives a 95% interval for the difference in BLEU-4 (corpus BLEU recomputed on each
resample from the per-problem statistics the evaluate stage stores), ACC-eq and ACC-eq (equivalent). The paper
reports averages only (Sec. 4.1 "Quantitative Results"); the intervals say which of its differences a run of this
size can resolve.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from mwpgen import registry
from mwpgen import paper

TABLE2_MODELS = registry.names(table2=True)  # the paper's row order
TABLE2_METRICS = (*paper.TABLE2_METRICS, "acc_eq_equivalent", "consistency_judged")
DISPLAY = {m.name: m.display for m in registry.MODELS.values()}
PAPER_KEY = {m.name: m.paper_key for m in registry.MODELS.values() if m.paper_key}
METRIC_NAMES = {"bleu4": "BLEU-4", "meteor": "METEOR", "rouge_l": "ROUGE-L", "acc_eq": "ACC-eq",
                "acc_eq_equivalent": "ACC-eq (equivalent)", "consistency_judged": "consistency (judged)",
                "novelty": "% novel", "acc_eq_novel": "ACC-eq (novel)",
                "dist3": "Dist-3"}
# The evaluator's figures on real test problems (flows/train.py): its own accuracy and the chance baseline.
REFERENCE_METRICS = ("oracle_acc_eq", "oracle_acc_eq_equivalent", "chance_acc_eq", "chance_acc_eq_equivalent")

BASELINE = "gpt_pre"  # Table 2's Δ is against GPT-pre: the paper's closest baseline to ours (same LM, L_LM only)
FULL_MODEL = "ours"  # Table 4's Δ is against the full model: what removing each part costs
BOOTSTRAP_RESAMPLES = 1000
DELTA_METRICS = ("bleu4", "acc_eq", "acc_eq_equivalent", "consistency_judged")
_PER_PROBLEM = ("acc_eq", "acc_eq_equivalent", "judged")  # the prediction records' 0/1 columns, DELTA_METRICS[1:]


def delta_names(against: str = "GPT-pre") -> dict[str, str]:
    return {m: f"Δ {METRIC_NAMES[m]} vs {against} [95% CI]" for m in DELTA_METRICS}


DELTA_NAMES = delta_names()
_SMALL, _TINY = 1e-9, 1e-15  # pycocoevalcap's BleuScorer smoothing: no division by zero, 0 matches -> 0


@dataclass
class Cell:
    values: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        return statistics.pstdev(self.values) if len(self.values) > 1 else 0.0

    def text(self, scale: float = 1.0, digits: int = 3) -> str:
        vals = [v for v in self.values if not math.isnan(v)]
        if not vals:
            return "–" if self.values else ""
        mean = statistics.fmean(vals) * scale
        if len(vals) == 1:
            return f"{mean:.{digits}f}"
        return f"{mean:.{digits}f} ± {statistics.pstdev(vals) * scale:.{digits}f}"


@dataclass
class Table:
    title: str
    columns: list[str]  # header labels after the row label
    rows: list[tuple[str, list[str]]]  # (label, cells)
    notes: list[str] = field(default_factory=list)
    banner: str = ""  # e.g. SMOKE_BANNER: stated above the table in every format

    def markdown(self) -> str:
        lines = ([f"**{self.banner}**", ""] if self.banner else []) + [
                 f"### {self.title}", "", "| | " + " | ".join(self.columns) + " |",
                 "|---|" + "---|" * len(self.columns)]
        lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in self.rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes]) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        if self.banner:
            buf.write(f"# {self.banner}\n")
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["model", *self.columns])
        writer.writerows([label, *cells] for label, cells in self.rows)
        return buf.getvalue()

    def latex(self) -> str:
        def esc(s: str) -> str:
            return (s.replace("%", r"\%").replace("±", r"$\pm$").replace("_", r"\_").replace("–", "--")
                    .replace("−", "$-$").replace("Δ", r"$\Delta$"))
        lines = [r"\begin{tabular}{l" + "c" * len(self.columns) + "}", r"\toprule",
                 " & " + " & ".join(esc(c) for c in self.columns) + r" \\", r"\midrule"]
        lines += [esc(label) + " & " + " & ".join(esc(c) for c in cells) + r" \\" for label, cells in self.rows]
        head = [f"% {self.banner}"] if self.banner else []
        return "\n".join([*head, f"% {self.title}", *lines, r"\bottomrule", r"\end{tabular}"]) + "\n"


SMOKE_BANNER = ("SMOKE TEST: a few training steps on a few problems, to check that every stage runs. These numbers "
                "are not results.")


def reported_datasets(listed: Sequence[str], scored: Iterable[str]) -> list[str]:
    """The tables' datasets, in the paper's order: those experiment.datasets lists, and those that runs of another
    profile have scored (`--profile mawps`, `--profile math23k`, then params.yaml back to its default)."""
    wanted = set(listed) | set(scored)
    return [d for d in paper.DATASETS if d in wanted]  # the params schema allows no other dataset


def observed_subsample(n_train: int, n_test: int, n_train_full: int, n_test_full: int) -> tuple[int, int] | None:
    """(training, test) problems as mark_subsamples takes them (0 = all) for a dataset the current params.yaml does
    not list: the sizes its runs recorded against its whole fold's; None when both are whole."""
    sizes = (n_train if n_train < n_train_full else 0, n_test if n_test < n_test_full else 0)
    return sizes if any(sizes) else None


def mark_subsamples(table: Table, sizes: dict[str, tuple[int, int]]) -> None:
    """The columns of each dataset scored on a subsample read "<dataset>*", and a note gives its sizes. `sizes`:
    dataset -> (training, test) problems drawn per fold, 0 = all."""
    for dataset, (train, test) in sizes.items():
        prefix = f"{dataset} "
        if any(c.startswith(prefix) for c in table.columns):
            table.columns = [f"{dataset}* {c[len(prefix):]}" if c.startswith(prefix) else c for c in table.columns]
            table.notes.append(f"{dataset}*: a seeded subsample of each fold, {train or 'all'} training and "
                               f"{test or 'all'} test problems (experiment.subsample); the paper's rows are whole folds.")


def aggregate(scores: Iterable[dict], metrics: Sequence[str]) -> dict[tuple[str, str, str], Cell]:
    """(model, dataset, metric) -> Cell of per-fold values; also records the folds seen under metric 'folds'."""
    cells: dict[tuple[str, str, str], Cell] = {}
    for s in scores:
        if s.get("not_run"):
            continue
        for metric in metrics:
            if metric in s and s[metric] is not None:
                cells.setdefault((s["model"], s["dataset"], metric), Cell()).values.append(float(s[metric]))
        cells.setdefault((s["model"], s["dataset"], "folds"), Cell()).values.append(float(s["fold"]))
    return cells


def not_run_reasons(scores: Iterable[dict]) -> dict[str, str]:
    """model -> why it did not run (e.g. no GloVe vectors offline), from score files marked not_run."""
    return {s["model"]: s["not_run"] for s in scores if s.get("not_run")}


def _folds_label(cells, model: str, datasets: Sequence[str]) -> str:
    parts = []
    for d in datasets:
        folds = cells.get((model, d, "folds"))
        if folds:
            parts.append(f"{d[:4]}:" + ",".join(str(int(f)) for f in sorted(folds.values)))
    return " ".join(parts)


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


def _signed(x: float) -> str:
    return f"{round(x, 3) + 0.0:+.3f}".replace("-", "−")  # + 0.0: no "-0.000"


def delta_text(delta: dict | None, metric: str) -> str:
    """`+0.012 [−0.004, +0.029]`: Δ and its 95% interval; "–" where no comparison could be made."""
    if not delta:
        return "–"
    d = delta[metric]
    return f"{_signed(d['mean'])} [{_signed(d['low'])}, {_signed(d['high'])}]"


def _delta_notes(deltas: dict[tuple[str, str], dict], against: str = "GPT-pre") -> list[str]:
    notes = [f"Δ … vs {against}: the model minus {against} on the same test problems (matched by id), mean over the "
             f"folds of the per-fold difference; [95% CI]: paired bootstrap, {BOOTSTRAP_RESAMPLES} seeded resamples "
             f"of each fold's test problems (experiment.seed), corpus BLEU-4 recomputed on every resample; an "
             f"interval that excludes 0 is a difference this run resolves. \"baseline\": {against} itself; –: no "
             f"{against} predictions on those folds."]
    notes += [f"{DISPLAY.get(m, m)} on {d}: compared on the {x['n']} problems both have; {x['unpaired']} problem(s) "
              f"only one of them has are left out." for (m, d), x in deltas.items() if x["unpaired"]]
    return notes


def _paper_row(name: str, reported: dict, datasets, metrics) -> tuple[str, list[str]]:
    """A (paper) row: the paper's reported 5-fold averages of one row of its table."""
    cells = {(d, m): f"{v:.3f}" for d in datasets for m, v in reported[d].items()}
    return f"{name} (paper)", _cells(datasets, metrics, cells) + ["5-fold"]


def _cells(datasets: Sequence[str], metrics: Sequence[str], values: dict[tuple[str, str], str],
           deltas: dict[tuple[str, str], str] | None = None) -> list[str]:
    """One row's cells, per dataset its metrics then its Δ columns, from (dataset, metric) -> text ("" if absent)."""
    deltas = deltas or {}
    return [x for d in datasets
            for x in [values.get((d, m), "") for m in metrics] + [deltas.get((d, m), "") for m in DELTA_METRICS]]


def _delta_texts(row: str, datasets: Sequence[str], deltas: dict[tuple[str, str], dict],
                 baseline: bool) -> dict[tuple[str, str], str]:
    """(dataset, metric) -> the Δ cell of `row` (deltas keyed (row, dataset)); "baseline" where `row` is the table's
    baseline itself."""
    return {(d, m): "baseline" if baseline else delta_text(deltas.get((row, d)), m)
            for d in datasets for m in DELTA_METRICS}


def _chance_note(oracle: Sequence[dict]) -> str:
    equations: dict[str, dict[str, list[int]]] = {}
    for o in oracle:
        if o.get("chance_equation"):
            equations.setdefault(o["dataset"], {}).setdefault(o["chance_equation"], []).append(o["fold"])
    which = "; ".join(f"{d} " + ", ".join(f"`{eq}` (fold {','.join(map(str, sorted(folds)))})"
                                          for eq, folds in eqs.items()) for d, eqs in equations.items())
    return ("Chance row: the training fold's most frequent equation (canonical form) answered for every test "
            "problem" + (f": {which}." if which else "."))


def judge_note(measured: dict | None) -> str:
    """What the consistency (judged) column measures, with the judge's precision and recall against the blind
    readings of the test part (the measure_judge stage's metrics/judge/<dataset>/fold<k>.json)."""
    if not measured or not measured.get("n"):
        return "consistency (judged): the share of problems the consistency judge (mwpgen/judge.py) accepts."
    test = measured["test"]
    j, acc = test["judge"], test["acc_eq"]

    def ratio(name: str, q: dict) -> str:
        ci = q[f"{name}_ci"]
        return "n/a" if q[name] is None else f"{q[name]:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")

    return (f"consistency (judged): the share of problems the consistency judge accepts ({measured['judge']}; "
            f"mwpgen/judge.py, chosen on development labels: docs/judge_choice). Against {test['n']} blind readings "
            f"of generated problems for {measured['dataset']} fold {measured['fold']} test equations "
            f"(data/labels/judge, {test['consistent']} consistent) its precision is {ratio('precision', j)} and its "
            f"recall {ratio('recall', j)} (ACC-eq's verdict: {ratio('precision', acc)} and {ratio('recall', acc)}; "
            f"95% bootstrap intervals; stage measure_judge), so it too overstates how many problems a reader finds "
            f"right.")


def judge_summary(measured: dict | None) -> dict:
    """report.json's record of the judge's measurement: per part, its and ACC-eq's precision and recall with their
    intervals (numbers only, for `dvc metrics`); empty without one."""
    if not measured or not measured.get("n"):
        return {}

    def numbers(q: dict) -> dict:
        out = {"accepted": q["accepted"]}
        for name in ("precision", "recall"):
            if q[name] is not None:
                out[name] = round(q[name], 4)
                if q[f"{name}_ci"]:
                    out[f"{name}_low"], out[f"{name}_high"] = q[f"{name}_ci"]
        return out

    return {part: {"n": measured[part]["n"], "consistent": measured[part]["consistent"],
                   **{verdict: numbers(measured[part][verdict]) for verdict in ("judge", "acc_eq")}}
            for part in ("dev", "test")}


def table2(scores: list[dict], oracle: list[dict], models: Sequence[str], datasets: Sequence[str],
           deltas: dict[tuple[str, str], dict] | None = None, judge: dict | None = None) -> Table:
    """Table 2 with ACC-eq (equivalent) and the judged consistency beside the paper's exact ACC-eq, the chance row
    and the Δ columns. `oracle`: the evaluator's per-fold REFERENCE_METRICS (+ ``chance_equation``); `deltas`:
    deltas_vs_gpt_pre; `judge`: the judge's measurement (judge_note)."""
    metrics, deltas = TABLE2_METRICS, deltas or {}
    cells = aggregate(scores, metrics)
    refs = aggregate(oracle, REFERENCE_METRICS)
    columns = [f"{d} {name}" for d in datasets
               for name in [METRIC_NAMES[m] for m in metrics] + list(DELTA_NAMES.values())] + ["folds run"]

    def evaluator(prefix: str) -> dict[tuple[str, str], str]:  # the oracle / chance figures: the ACC-eq columns
        return {(d, m): refs.get(("mwp2eq", d, f"{prefix}_{m}"), Cell()).text()
                for d in datasets for m in ("acc_eq", "acc_eq_equivalent")}

    folds = _folds_label(refs, "mwp2eq", datasets)
    rows = [("mwp2eq oracle ACC-eq (this run)", _cells(datasets, metrics, evaluator("oracle")) + [folds]),
            ("mwp2eq oracle ACC-eq (paper)",
             _cells(datasets, metrics, {(d, "acc_eq"): f"({paper.ORACLE_ACC_EQ[d]:.3f})" for d in datasets})
             + ["5-fold"]),
            ("chance: most frequent training equation (this run)",
             _cells(datasets, metrics, evaluator("chance")) + [folds])]
    skipped = not_run_reasons(scores)
    for model in models:
        name = DISPLAY.get(model, model)
        if any((model, d, m) in cells for d in datasets for m in metrics):
            measured = {(d, m): cells.get((model, d, m), Cell()).text() for d in datasets for m in metrics}
            rows.append((f"{name} (this run)",
                         _cells(datasets, metrics, measured, _delta_texts(model, datasets, deltas, model == BASELINE))
                         + [_folds_label(cells, model, datasets)]))
        elif model in skipped:
            rows.append((f"{name} (this run)", ["not run"] * (len(columns) - 1) + [f"not run: {skipped[model]}"]))
        if PAPER_KEY.get(model) in paper.TABLE2:
            rows.append(_paper_row(name, paper.TABLE2[PAPER_KEY[model]], datasets, metrics))
    return Table("Table 2: language quality and equation accuracy", columns, rows,
                 ["(this run) rows: mean ± population std over the folds listed; (paper) rows: the paper's reported "
                  "5-fold averages, for reference.",
                  "ACC-eq: the evaluator's equation equals the input equation symbol for symbol (canonical form; the "
                  "paper's metric, Sec. 4 \"Metrics\"); ACC-eq (equivalent): it is the same equation symbolically "
                  "(e.g. num2 + num1 for num1 + num2). The paper reports the exact one only.",
                  judge_note(judge),
                  _chance_note(oracle),
                  *_delta_notes({k: v for k, v in deltas.items() if k[0] in models and k[1] in datasets}),
                  "Empty cell: not run; – : not computable (e.g. no novel problems); \"not run\": the model could "
                  "not be trained here, for the reason given (never replaced by a stand-in)."])


def table3(scores: list[dict], models: Sequence[str], datasets: Sequence[str]) -> Table:
    cells = aggregate(scores, ["novelty", "acc_eq_novel", "dist3"])
    columns = [f"{d} {METRIC_NAMES[m]}" for d in datasets for m in ("novelty", "acc_eq_novel", "dist3")]
    rows = []
    for model in models:
        if any((model, d, "novelty") in cells for d in datasets):
            rows.append((f"{DISPLAY.get(model, model)} (this run)",
                         [cells.get((model, d, m), Cell()).text(scale=100 if m == "novelty" else 1,
                                                                digits=2 if m == "novelty" else 3)
                          for d in datasets for m in ("novelty", "acc_eq_novel", "dist3")]))
        key = PAPER_KEY.get(model)
        if key in paper.TABLE3_PERCENT_NOVEL:
            rows.append((f"{DISPLAY.get(model, model)} (paper)",
                         [f"{paper.TABLE3_PERCENT_NOVEL[key][d]:.2f}" if m == "novelty" else ""
                          for d in datasets for m in ("novelty", "acc_eq_novel", "dist3")]))
    return Table("Table 3: % of generated problems not in the training fold", columns, rows,
                 ["% novel: normalised generated text not found among the training fold's problems.",
                  "ACC-eq (novel): ACC-eq over the novel problems only; Dist-3: distinct 3-grams / all 3-grams."])


def ablation_runs(scores: list[dict], variant_of, rows_of, datasets: Sequence[str], folds: Sequence[int],
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
        source = sorted({s["source_model"] for s in shown})
        deltas = {}
        for d in datasets:
            delta = compare_runs(predictions or {}, {(s["source_model"], d, s["fold"]) for s in shown
                                                     if s["dataset"] == d and s["source_model"] != FULL_MODEL},
                                 seed, baseline=FULL_MODEL)
            if delta:
                deltas[d] = delta
        out[label] = {"scores": shown, "source": source, "deltas": deltas,
                      "runs": sorted({f"{s['dataset'][:4]}:{s['fold']}" for s in shown})}
    return out


def table4(runs: dict[str, dict], row_labels: Sequence[str], datasets: Sequence[str],
           judge: dict | None = None) -> Table:
    """Table 4 (ablation): BLEU-4 and ACC-eq (exact, equivalent) and the judged consistency of each variant that
    ran (`runs`: ablation_runs), and each row's Δ against the full model; the paper's rows beside them."""
    metrics = DELTA_METRICS
    cells = aggregate([s for row in runs.values() for s in row["scores"]], metrics)
    columns = [f"{d} {name}" for d in datasets
               for name in [METRIC_NAMES[m] for m in metrics] + list(delta_names("full model").values())] + ["runs"]
    rows = []
    for label in row_labels:
        if label in runs:
            row = runs[label]
            measured = {(d, m): cells.get((label, d, m), Cell()).text() for d in datasets for m in metrics}
            deltas = {(label, d): x for d, x in row["deltas"].items()}
            delta = _delta_texts(label, datasets, deltas, row["source"] == [FULL_MODEL])
            rows.append((f"{label} (this run)", _cells(datasets, metrics, measured, delta)
                         + [" ".join(row["runs"]) + " from " + ", ".join(row["source"])]))
        if label in paper.TABLE4:
            rows.append(_paper_row(label, paper.TABLE4[label], datasets, metrics))
    all_deltas = {(label, d): x for label, row in runs.items() for d, x in row["deltas"].items()}
    return Table("Table 4: ablation (BLEU-4, ACC-eq and judged consistency)", columns, rows,
                 ["Each (this run) row is one training run of \"ours\" with the switches of mwpgen/ours/ablation.py; rows "
                  "that are the same run in the paper's table (context selection = full model w/o L_eq) share it.",
                  "Rows without a (this run) line have not been run: python -m orchestration.pipeline --profile ablation.",
                  judge_note(judge), *_delta_notes(all_deltas, "full model")])


def _rounded_delta(d: dict) -> dict:
    """A paired_bootstrap result for `dvc metrics`: each metric's mean and interval to 4 places, n, unpaired."""
    return {**{m: {k: round(v, 4) for k, v in d[m].items()} for m in DELTA_METRICS}, "n": d["n"],
            "unpaired": d["unpaired"]}


def ablation_summary(runs: dict[str, dict]) -> dict:
    """Table 4 for `dvc metrics`: {row label: {dataset: {metric: mean, "delta_vs_full_model": {...}}}}."""
    out: dict = {}
    for (label, dataset, metric), cell in aggregate([s for r in runs.values() for s in r["scores"]],
                                                    DELTA_METRICS).items():
        if metric != "folds" and not math.isnan(cell.mean):
            out.setdefault(label, {}).setdefault(dataset, {})[metric] = round(cell.mean, 4)
    for label, row in runs.items():
        for dataset, d in row["deltas"].items():
            out.setdefault(label, {}).setdefault(dataset, {})["delta_vs_full_model"] = _rounded_delta(d)
    return out


def seed_summary(sweep: dict) -> dict:
    """A selector seed sweep (mwpgen.selector_sweep's report) for `dvc metrics`: {setting: {"seed <s>": {test words
    per problem (median), share of test problems with none, holds}, "all_hold": ...}}."""
    out: dict = {}
    for row in sweep["rows"]:
        setting = out.setdefault(row["setting"].replace(".", "_"), {})  # a "." would read as a level of the key
        setting[f"seed {row['seed']}"] = {"test_words_median": row["test"]["words_median"],
                                          "test_none_share": round(row["test"]["none_share"], 4),
                                          "holds": bool(row["holds"])}
    for setting in out.values():
        setting["all_hold"] = all(v["holds"] for v in setting.values())
    return out


def selection_summary(picks: Sequence[Sequence[str]], nouns: Sequence[Sequence[str]],
                      tfidf: Sequence[Sequence[str]]) -> dict:
    """What the selector picked over a fold's test problems: words per problem (median, mean), the share of
    problems with none, and the share of picked words that are among the same problem's noun keywords and among
    its TF-IDF top 5 (case-insensitive). The paper's Table 5 shows 2-8 words per problem."""
    counts = [len(p) for p in picks]
    picked = [(w.lower(), {x.lower() for x in n}, {x.lower() for x in t}) for p, n, t in zip(picks, nouns, tfidf)
              for w in p]
    share = lambda hits: hits / len(picked) if picked else math.nan  # noqa: E731
    return {"problems": len(counts), "words_median": statistics.median(counts) if counts else math.nan,
            "words_mean": statistics.fmean(counts) if counts else math.nan,
            "none_share": sum(c == 0 for c in counts) / len(counts) if counts else math.nan,
            "in_nouns": share(sum(w in n for w, n, _ in picked)), "in_tfidf": share(sum(w in t for w, _, t in picked))}


def table5(examples: Sequence[dict], limit: int = 6, selection: dict[str, dict] | None = None) -> Table:
    """Table 5: context keywords the selector picks (q > threshold) from real test problems, beside the
    heuristic noun and TF-IDF keywords of the same problems. examples: dicts with dataset, id, problem,
    selected, noun, tfidf. selection: dataset -> selection_summary over all of its test problems."""
    rows = [(f"{e['dataset']} {e['id']}", [e["problem"], " ".join(e["selected"]) or "(none)", " ".join(e["noun"]),
                                           " ".join(e["tfidf"])]) for e in examples[:limit]]
    paper_rows = [(f"paper example {i + 1}", [p, " ".join(k), "", ""]) for i, (p, k) in enumerate(paper.TABLE5)]
    notes = ["Selected keywords come from the trained selector of \"ours\" on each dataset's first test problems "
             "(results/generations/ours/*, column context)."]
    for dataset, st in (selection or {}).items():
        if st["problems"]:
            notes.append(f"{dataset}, all {st['problems']} test problems: {st['words_median']:g} words selected per "
                         f"problem (median; mean {st['words_mean']:.1f}), none for {st['none_share']:.1%} of them; "
                         f"{st['in_nouns']:.1%} of the selected words are among the problem's noun keywords and "
                         f"{st['in_tfidf']:.1%} among its TF-IDF top 5 (the paper's Table 5: 2-8 words).")
    return Table("Table 5: selected context keywords", ["MWP", "selected (q > 0.5)", "noun", "TF-IDF"],
                 rows + paper_rows, notes)


def summary(scores: list[dict], oracle: list[dict], deltas: dict[tuple[str, str], dict] | None = None) -> dict:
    """Nested {model: {dataset: {metric: mean}}} for `dvc metrics show/diff`, with each model's
    ``delta_vs_gpt_pre`` ({metric: {mean, low, high}}, n, unpaired; from deltas_vs_gpt_pre), the evaluator's oracle
    figures under "mwp2eq" and the chance baseline under "chance"."""
    out: dict = {}
    metrics = ("bleu4", "meteor", "rouge_l", "acc_eq", "acc_eq_equivalent", "consistency_judged", "novelty",
               "acc_eq_novel", "dist3")
    for (model, dataset, metric), cell in aggregate(scores, metrics).items():
        if metric != "folds" and not math.isnan(cell.mean):
            out.setdefault(model, {}).setdefault(dataset, {})[metric] = round(cell.mean, 4)
    for (_, dataset, metric), cell in aggregate(oracle, REFERENCE_METRICS).items():
        if metric != "folds":
            owner, name = ("mwp2eq", metric) if metric.startswith("oracle_") else ("chance", metric[len("chance_"):])
            out.setdefault(owner, {}).setdefault(dataset, {})[name] = round(cell.mean, 4)
    for (model, dataset), d in (deltas or {}).items():
        out.setdefault(model, {}).setdefault(dataset, {})["delta_vs_gpt_pre"] = _rounded_delta(d)
    return out
