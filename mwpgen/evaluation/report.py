"""The paper's result tables from per-fold score files: mean ± std over the folds that ran, with the paper's
reported figures alongside, as Markdown, CSV and LaTeX.

Rows = models; columns = dataset x metric. A cell is empty where that model/dataset did not run; a row's
"folds" column says which folds it averages, so a partial run is never mistaken for the full protocol.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from mwpgen import registry
from mwpgen.evaluation import paper

TABLE2_MODELS = registry.names(table2=True)  # the paper's row order
DISPLAY = {m.name: m.display for m in registry.MODELS.values()}
PAPER_KEY = {m.name: m.paper_key for m in registry.MODELS.values() if m.paper_key}
METRIC_NAMES = {"bleu4": "BLEU-4", "meteor": "METEOR", "rouge_l": "ROUGE-L", "acc_eq": "ACC-eq",
                "novelty": "% novel", "acc_eq_novel": "ACC-eq (novel)", "dist3": "Dist-3"}


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

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| | " + " | ".join(self.columns) + " |",
                 "|---|" + "---|" * len(self.columns)]
        lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in self.rows]
        return "\n".join(lines + [""] + [f"- {n}" for n in self.notes]) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["model", *self.columns])
        writer.writerows([label, *cells] for label, cells in self.rows)
        return buf.getvalue()

    def latex(self) -> str:
        def esc(s: str) -> str:
            return s.replace("%", r"\%").replace("±", r"$\pm$").replace("_", r"\_").replace("–", "--")
        lines = [r"\begin{tabular}{l" + "c" * len(self.columns) + "}", r"\toprule",
                 " & " + " & ".join(esc(c) for c in self.columns) + r" \\", r"\midrule"]
        lines += [esc(label) + " & " + " & ".join(esc(c) for c in cells) + r" \\" for label, cells in self.rows]
        return "\n".join([f"% {self.title}", *lines, r"\bottomrule", r"\end{tabular}"]) + "\n"


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


def table2(scores: list[dict], oracle: list[dict], models: Sequence[str], datasets: Sequence[str]) -> Table:
    metrics = paper.TABLE2_METRICS
    cells = aggregate(scores, metrics)
    oracle_cells = aggregate(oracle, ["oracle_acc_eq"])
    columns = [f"{d} {METRIC_NAMES[m]}" for d in datasets for m in metrics] + ["folds run"]
    rows = [("mwp2eq oracle ACC-eq (this run)",
             ["" if m != "acc_eq" else oracle_cells.get(("mwp2eq", d, "oracle_acc_eq"), Cell()).text()
              for d in datasets for m in metrics] + [_folds_label(oracle_cells, "mwp2eq", datasets)]),
            ("mwp2eq oracle ACC-eq (paper)",
             ["" if m != "acc_eq" else f"({paper.ORACLE_ACC_EQ[d]:.3f})" for d in datasets for m in metrics] + ["5-fold"])]
    skipped = not_run_reasons(scores)
    for model in models:
        if any((model, d, m) in cells for d in datasets for m in metrics):
            rows.append((f"{DISPLAY.get(model, model)} (this run)",
                         [cells.get((model, d, m), Cell()).text() for d in datasets for m in metrics]
                         + [_folds_label(cells, model, datasets)]))
        elif model in skipped:
            rows.append((f"{DISPLAY.get(model, model)} (this run)",
                         ["not run"] * (len(columns) - 1) + [f"not run: {skipped[model]}"]))
        key = PAPER_KEY.get(model)
        if key in paper.TABLE2:
            rows.append((f"{DISPLAY.get(model, model)} (paper)",
                         [f"{paper.TABLE2[key][d][m]:.3f}" for d in datasets for m in metrics] + ["5-fold"]))
    return Table("Table 2: language quality and equation accuracy", columns, rows,
                 ["(this run) rows: mean ± population std over the folds listed; (paper) rows: the paper's reported "
                  "5-fold averages, for reference.",
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


def table4(scores: list[dict], variant_of, rows_of, row_labels: Sequence[str], datasets: Sequence[str]) -> Table:
    """Table 4 (ablation): BLEU-4 and ACC-eq of each variant that ran. `variant_of(model)` maps a score's model
    to its ablation variant (or None); `rows_of(variant)` gives the Table 4 rows a variant answers."""
    metrics = ("bleu4", "acc_eq")
    by_row: dict[str, list[dict]] = {}
    for s in scores:
        variant = variant_of(s["model"])
        if variant is not None and not s.get("not_run"):
            for label in rows_of(variant):
                by_row.setdefault(label, []).append(s | {"model": label, "source_model": s["model"]})
    cells = aggregate([s for ss in by_row.values() for s in ss], metrics)
    columns = [f"{d} {METRIC_NAMES[m]}" for d in datasets for m in metrics] + ["runs"]
    rows = []
    for label in row_labels:
        shown = [s for s in by_row.get(label, []) if s["dataset"] in datasets]
        if shown:
            runs = sorted({f"{s['dataset'][:4]}:{s['fold']}" for s in shown})
            source = sorted({s["source_model"] for s in shown})
            rows.append((f"{label} (this run)", [cells.get((label, d, m), Cell()).text() for d in datasets for m in metrics]
                         + [" ".join(runs) + " from " + ", ".join(source)]))
        if label in paper.TABLE4:
            rows.append((f"{label} (paper)", [f"{paper.TABLE4[label][d][m]:.3f}" for d in datasets for m in metrics]
                         + ["5-fold"]))
    return Table("Table 4: ablation (BLEU-4 and ACC-eq)", columns, rows,
                 ["Each (this run) row is one training run of \"ours\" with the switches of mwpgen/ours/ablation.py; rows "
                  "that are the same run in the paper's table (context selection = full model w/o L_eq) share it.",
                  "Rows without a (this run) line have not been run: python -m flows.pipeline --profile ablation."])


def table5(examples: Sequence[dict], limit: int = 6, selection: dict[str, list[int]] | None = None) -> Table:
    """Table 5: context keywords the selector picks (q > threshold) from real test problems, beside the
    heuristic noun and TF-IDF keywords of the same problems. examples: dicts with dataset, id, problem,
    selected, noun, tfidf. selection: dataset -> number of words selected for each of its test problems."""
    rows = [(f"{e['dataset']} {e['id']}", [e["problem"], " ".join(e["selected"]) or "(none)", " ".join(e["noun"]),
                                           " ".join(e["tfidf"])]) for e in examples[:limit]]
    paper_rows = [(f"paper example {i + 1}", [p, " ".join(k), "", ""]) for i, (p, k) in enumerate(paper.TABLE5)]
    notes = ["Selected keywords come from the trained selector of \"ours\" on each dataset's first test problems "
             "(results/generations/ours/*, column context)."]
    for dataset, counts in (selection or {}).items():
        if counts:
            notes.append(f"{dataset}: {sum(counts) / len(counts):.1f} words selected per test problem on average, "
                         f"none for {sum(c == 0 for c in counts)} of {len(counts)} problems (the paper's examples: "
                         f"2-4 words).")
    return Table("Table 5: selected context keywords", ["MWP", "selected (q > 0.5)", "noun", "TF-IDF"],
                 rows + paper_rows, notes)


def summary(scores: list[dict], oracle: list[dict]) -> dict:
    """Nested {model: {dataset: {metric: mean}}} for `dvc metrics show/diff`."""
    out: dict = {}
    metrics = ("bleu4", "meteor", "rouge_l", "acc_eq", "novelty", "acc_eq_novel", "dist3")
    for (model, dataset, metric), cell in aggregate(scores, metrics).items():
        if metric != "folds" and not math.isnan(cell.mean):
            out.setdefault(model, {}).setdefault(dataset, {})[metric] = round(cell.mean, 4)
    for (model, dataset, metric), cell in aggregate(oracle, ["oracle_acc_eq"]).items():
        if metric != "folds":
            out.setdefault("mwp2eq", {}).setdefault(dataset, {})["oracle_acc_eq"] = round(cell.mean, 4)
    return out
