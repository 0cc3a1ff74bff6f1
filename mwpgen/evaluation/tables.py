"""The paper's result tables as text: Markdown, CSV and LaTeX, from the numbers of mwpgen/evaluation/statistics.py.

Each of the paper's tables is a TableGroup of small tables, one per dataset: rows = models, columns = metrics, the
paper's reported figure in a column beside each of ours that it reports. The differences against the baseline
(GPT-pre in Table 2, the full model in Table 4) with their 95% paired-bootstrap intervals are tables of their own,
so no table is wider than a page. Models that did not run are one note each, not a row of empty cells.

Row labels say what a model is built on (`params.train.model`): "GPT-pre (SmolLM2-135M, fine-tuned)" is not the
paper's GPT-2. The CSV is long-form (one line per cell: table, row, column, value) since the tables of a group have
different columns; the LaTeX needs no package beyond LaTeX itself.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
import textwrap
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from mwpgen import paper, registry
from mwpgen.evaluation.statistics import (
    BASELINE,
    BOOTSTRAP_RESAMPLES,
    DELTA_METRICS,
    FULL_MODEL,
    REFERENCE_METRICS,
    Samples,
    aggregate,
    not_run_reasons,
)

TABLE2_MODELS = registry.names(table2=True)  # the paper's row order
LEARNED = "consistency_learned"  # the learned judge's share, only on folds where train_judge adopted one
TABLE2_METRICS = (*paper.TABLE2_METRICS, "acc_eq_equivalent", "consistency_judged", LEARNED)
TABLE3_METRICS = ("novelty", "acc_eq_novel", "dist3")
METRIC_NAMES = {"bleu4": "BLEU-4", "meteor": "METEOR", "rouge_l": "ROUGE-L", "acc_eq": "ACC-eq",
                "acc_eq_equivalent": "ACC-eq (equivalent)", "consistency_judged": "consistency (judged)",
                LEARNED: "consistency (learned)",
                "novelty": "% novel", "acc_eq_novel": "ACC-eq (novel)", "dist3": "Dist-3"}
PAPER_KEY = {m.name: m.paper_key for m in registry.MODELS.values() if m.paper_key}
# Readable names of the base LMs params.train.model is usually set to (an HF id is shown by its last part).
BASE_MODEL_NAMES = {"smollm2-135m": "SmolLM2-135M", "gpt2": "GPT-2", "gpt2-medium": "GPT-2 medium",
                    "gpt2-large": "GPT-2 large"}
SEQ2SEQ_ARCHITECTURES = {"seq2seq-rnn": "LSTM", "seq2seq-transformer": "transformer"}
SMOKE_BANNER = ("SMOKE TEST: a few training steps on a few problems, to check that every stage runs. These numbers "
                "are not results.")
NOTE_WIDTH = 116  # Markdown prose is wrapped so that the files read well as plain text too


# --- what a row is ------------------------------------------------------------------------------------------------

def base_model_name(model: str) -> str:
    """params.train.model as a reader knows it: "smollm2-135m" -> "SmolLM2-135M"; an HF id or path -> its last
    part."""
    last = model.rstrip("/").rsplit("/", 1)[-1]
    return BASE_MODEL_NAMES.get(model) or BASE_MODEL_NAMES.get(last) or last


def model_label(name: str, base_model: str) -> str:
    """A model's row label, saying what it is built on: "GPT-pre (SmolLM2-135M, fine-tuned)", "GPT (SmolLM2-135M
    architecture, from scratch)", "ours (SmolLM2-135M)", "seq2seq-tf (transformer, from scratch)"."""
    if name not in registry.MODELS:
        return name
    spec, base = registry.spec(name), base_model_name(base_model)
    if spec.family == "causal_lm":
        return f"{spec.display} ({base}, fine-tuned)" if spec.pretrained else \
            f"{spec.display} ({base} architecture, from scratch)"
    if spec.family == "seq2seq":
        architecture = SEQ2SEQ_ARCHITECTURES.get(spec.preset or "", spec.preset or "seq2seq")
        return f"{spec.display} ({architecture}, {'GloVe embeddings' if spec.glove else 'from scratch'})"
    return f"{spec.display} ({base})"


def _display(name: str) -> str:
    return registry.MODELS[name].display if name in registry.MODELS else name


# --- cells --------------------------------------------------------------------------------------------------------

@dataclass
class Cell:
    """One table cell's per-fold values: its text is the mean, ± the population std over two or more folds."""
    values: list[float] = field(default_factory=list)

    def text(self, scale: float = 1.0, digits: int = 3) -> str:
        numbers = [v for v in self.values if not math.isnan(v)]
        if not numbers:
            return "–" if self.values else ""  # – : computed but undefined (e.g. no novel problems)
        mean = statistics.fmean(numbers) * scale
        if len(numbers) == 1:
            return f"{mean:.{digits}f}"
        # no spaces around ±: a 5-fold Table 2 row stays narrow enough to read unwrapped
        return f"{mean:.{digits}f}±{statistics.pstdev(numbers) * scale:.{digits}f}"


def _text(samples: Samples, key: tuple[str, str, str], scale: float = 1.0, digits: int = 3) -> str:
    return Cell(samples.get(key, [])).text(scale, digits)


def _paper(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _signed(x: float) -> str:
    return f"{round(x, 3) + 0.0:+.3f}".replace("-", "−")  # + 0.0: no "-0.000"


def delta_text(delta: dict | None, metric: str) -> str:
    """`+0.012 [−0.004, +0.029]`: Δ and its 95% interval; "–" where no comparison could be made."""
    if not delta:
        return "–"
    d = delta[metric]
    return f"{_signed(d['mean'])} [{_signed(d['low'])}, {_signed(d['high'])}]"


def _folds(values: Sequence[float]) -> str:
    folds = sorted({int(f) for f in values})
    return f"fold{'s' if len(folds) > 1 else ''} {','.join(map(str, folds))}"


# --- tables -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    name: str  # unique in its table: the CSV's column name, e.g. "BLEU-4 (paper)"
    header: str  # the Markdown header: "BLEU-4", and "paper" for the paper's figure right beside it
    group: str = ""  # LaTeX: neighbouring columns of one group share a \multicolumn header ...
    sub: str = ""  # ... with these labels under it ("this run", "paper")


def metric_columns(metric: str, reported_by_paper: bool) -> list[Column]:
    """A metric's column, and the paper's beside it where the paper reports that metric."""
    name = METRIC_NAMES[metric]
    if not reported_by_paper:
        return [Column(name, name)]
    return [Column(name, name, group=name, sub="this run"), Column(f"{name} (paper)", "paper", group=name, sub="paper")]


@dataclass
class Table:
    title: str
    caption: str
    columns: list[Column]
    rows: list[tuple[str, list[str]]]  # (label, one cell per column)
    notes: list[str] = field(default_factory=list)
    corner: str = "model"  # the header of the row labels

    def cells(self) -> dict[str, dict[str, str]]:
        """row label -> {column name: cell}: what tests and readers look up."""
        return {label: dict(zip((c.name for c in self.columns), cells)) for label, cells in self.rows}

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", _wrap(self.caption), "",
                 "| " + " | ".join([self.corner, *(c.header for c in self.columns)]) + " |",
                 "|---|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join([label, *cells]) + " |" for label, cells in self.rows]
        notes = ["", *(_wrap(f"- {n}", "  ") for n in self.notes)] if self.notes else []
        return "\n".join(lines + notes) + "\n"

    def csv_rows(self) -> list[list[str]]:
        """Long form: (table, row, column, value), one per non-empty cell."""
        return [[self.title, label, column.name, cell] for label, cells in self.rows
                for column, cell in zip(self.columns, cells) if cell]

    def latex(self) -> str:
        spec = "p{4.2cm}" + "c" * len(self.columns)  # labels such as "GPT (SmolLM2-135M architecture, ...)" wrap
        lines = [r"\begin{table}[htbp]", r"\centering", r"\small", rf"\caption{{{latex_escape(self.caption)}}}",
                 rf"\begin{{tabular}}{{{spec}}}", r"\hline", *self._latex_header(), r"\hline"]
        lines += [" & ".join(latex_escape(x) for x in [label, *cells]) + r" \\" for label, cells in self.rows]
        lines += [r"\hline", r"\end{tabular}"]
        if self.notes:
            lines += [r"\par\medskip\footnotesize", *(latex_escape(n) + r"\par" for n in self.notes)]
        return "\n".join([f"% {latex_escape(self.title)}", *lines, r"\end{table}"]) + "\n"

    def _latex_header(self) -> list[str]:
        """One header row, or two where columns are grouped: the group spanning its columns (\\multicolumn, a
        \\cline under it), then each column's sub-label."""
        if not any(c.group for c in self.columns):
            return [" & ".join(latex_escape(x) for x in [self.corner, *(c.header for c in self.columns)]) + r" \\"]
        top, under, clines, i = [latex_escape(self.corner)], [""], [], 0
        while i < len(self.columns):
            column = self.columns[i]
            span = 1
            while column.group and i + span < len(self.columns) and self.columns[i + span].group == column.group:
                span += 1
            if column.group:
                top.append(rf"\multicolumn{{{span}}}{{c}}{{{latex_escape(column.group)}}}")
                under += [latex_escape(c.sub) for c in self.columns[i:i + span]]
                clines.append(rf"\cline{{{i + 2}-{i + span + 1}}}")  # +2: the label column is column 1
            else:
                top.append(latex_escape(column.header))
                under.append("")
            i += span
        return [" & ".join(top) + r" \\", " ".join(clines), " & ".join(under) + r" \\"]


@dataclass
class TableGroup:
    """One of the paper's tables: its per-dataset tables, and the notes they share."""
    title: str
    tables: list[Table]
    notes: list[str] = field(default_factory=list)
    banner: str = ""  # e.g. SMOKE_BANNER: stated above the tables in every format

    def table(self, title_start: str) -> Table:
        return next(t for t in self.tables if t.title.startswith(title_start))

    def markdown(self) -> str:
        head = ([f"**{self.banner}**", ""] if self.banner else []) + [f"## {self.title}", ""]
        notes = ["Notes:", "", *(_wrap(f"- {n}", "  ") for n in self.notes)] if self.notes else []
        return "\n".join(head + [t.markdown() for t in self.tables] + notes) + "\n"

    def csv(self) -> str:
        buf = io.StringIO()
        if self.banner:
            buf.write(f"# {self.banner}\n")
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["table", "row", "column", "value"])
        writer.writerows(row for t in self.tables for row in t.csv_rows())
        return buf.getvalue()

    def latex(self) -> str:
        """The tables as LaTeX floats, then the shared notes as a list (plain LaTeX: no package needed)."""
        head = [f"% {latex_escape(self.banner)}", rf"\noindent\textbf{{{latex_escape(self.banner)}}}\par"] \
            if self.banner else []
        notes = [r"\begin{itemize}", *(rf"\item {latex_escape(n)}" for n in self.notes), r"\end{itemize}"] \
            if self.notes else []
        return "\n".join([*head, f"% {latex_escape(self.title)}", *(t.latex() for t in self.tables), *notes]) + "\n"


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, NOTE_WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "%": r"\%", "#": r"\#",
          "_": r"\_", "^": r"\^{}", "~": r"\~{}", "<": "$<$", ">": "$>$", "|": "$|$", "±": r"$\pm$", "−": "$-$",
          "–": "--", "—": "---", "Δ": r"$\Delta$", "×": r"$\times$", "…": r"\ldots{}", "≥": r"$\geq$",
          "≤": r"$\leq$", "→": r"$\rightarrow$", "“": "``", "”": "''", "‘": "`", "’": "'", "·": r"$\cdot$"}


def latex_escape(text: str) -> str:
    """Text as LaTeX source that pdflatex typesets without packages: its special characters escaped, `code` in
    \\texttt, the few non-ASCII symbols the tables use as LaTeX, any other accent dropped (NFKD)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick is a literal one
        parts = [text.replace("`", "'")]
    return "".join(rf"\texttt{{{_escape(p)}}}" if i % 2 else _escape(p) for i, p in enumerate(parts))


def _escape(text: str) -> str:
    def one(ch: str) -> str:
        if ch in _LATEX:
            return _LATEX[ch]
        return ch if ch.isascii() else unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return "".join(one(ch) for ch in text)


# --- what every table says about its runs -------------------------------------------------------------------------

def _run_caption(samples: Samples, models: Sequence[str], dataset: str) -> str:
    """"fold 0, 298 test problems per fold": the folds and test sizes of `models`' runs on `dataset`."""
    folds = sorted({f for m in models for f in samples.get((m, dataset, "folds"), [])})
    sizes = sorted({int(n) for m in models for n in samples.get((m, dataset, "n"), [])})
    size = "" if not sizes else f", {sizes[0]} test problems per fold" if len(sizes) == 1 else \
        f", {sizes[0]}-{sizes[-1]} test problems per fold"
    return (_folds(folds) if folds else "no folds scored") + size


def _fold_mark(samples: Samples, model: str, dataset: str, shown: Sequence[str]) -> str:
    """" [fold 0]" after a row that averages fewer or other folds than the table's others; else ""."""
    mine = set(samples.get((model, dataset, "folds"), []))
    every = {f for m in shown for f in samples.get((m, dataset, "folds"), [])}
    return "" if mine == every else f" [{_folds(sorted(mine))}]"


def _paper_figures(reported: dict[str, float]) -> str:
    return ", ".join(f"{METRIC_NAMES[m]} {v:.3f}" for m, v in reported.items())


def _delta_method(against: str) -> str:
    return (f"Differences: the model minus {against} on the same test problems (matched by id), the mean over the "
            f"folds of the per-fold difference; [95% interval]: paired bootstrap, {BOOTSTRAP_RESAMPLES} seeded "
            f"resamples of each fold's test problems (experiment.seed), corpus BLEU-4 recomputed on every resample. "
            f"An interval that excludes 0 is a difference this run resolves; –: no predictions of {against} on "
            f"those folds.")


def _unpaired_notes(deltas: dict[tuple[str, str], dict], labels: dict[str, str]) -> list[str]:
    return [f"{labels.get(m, m)} on {d}: compared on the {x['n']} problems both have; {x['unpaired']} problem(s) "
            f"only one of them has are left out." for (m, d), x in deltas.items() if x["unpaired"]]


def _paired_size(deltas: dict[tuple[str, str], dict], rows: Sequence[str], dataset: str) -> str:
    """" 298" when every comparison of `rows` on `dataset` counts the same problems (over all folds); else ""."""
    sizes = {deltas[(r, dataset)]["n"] for r in rows if (r, dataset) in deltas}
    return f" {sizes.pop()}" if len(sizes) == 1 else ""


def delta_table(title: str, caption: str, rows: Sequence[tuple[str, dict | None]], corner: str = "model") -> Table:
    """The differences of `rows` ((label, paired_bootstrap result or None)) as Δ and 95% interval per metric."""
    columns = [Column(f"Δ {METRIC_NAMES[m]}", f"Δ {METRIC_NAMES[m]}") for m in DELTA_METRICS]
    return Table(title, caption, columns, [(label, [delta_text(d, m) for m in DELTA_METRICS]) for label, d in rows],
                 corner=corner)


def has_learned_judge(trained: dict | None) -> bool:
    """Whether the train_judge stage's metrics/judge_train/<dataset>/fold<k>.json describe a judge it adopted (one
    fitted but not adopted, since it did not judge validation better than the rule, judges nothing)."""
    return bool(trained) and "validation" in trained and trained.get("adopted", True) is True


def _ratio(name: str, q: dict) -> str:
    ci = q.get(f"{name}_ci")
    return "n/a" if q.get(name) is None else f"{q[name]:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _share_against_readers(accepted: int | None, consistent: int | None, n: int | None) -> str:
    """Whether a judge's share states more or fewer problems right than readers found, from the figures: ", so its
    share overstates how many problems a reader finds right (it accepts 58 of 300, readers 44)"."""
    if accepted is None or consistent is None or not n:
        return ""
    verb = "overstates" if accepted > consistent else "understates" if accepted < consistent else "matches"
    return (f", so its share {verb} how many problems a reader finds right (it accepts {accepted} of {n}, readers "
            f"found {consistent} right)")


def _learned_scores(scores: Sequence[dict]) -> list[dict]:
    return [s for s in scores if s.get(LEARNED) is not None and not s.get("not_run")]


def judged_caption(scores: Sequence[dict], trained: dict | None, measured: dict | None = None) -> str:
    """The part of a table's caption that says which judge each consistency column counts: the rule for "judged"
    on every fold; for "learned" the learned judge where train_judge adopted one, with its precision and recall on
    the validation readings that chose its threshold (in-sample) and, where measure_judge has run, on test readings
    (metrics/judge/...). Empty when no score of `scores` has a learned judge's share."""
    if not _learned_scores(scores) or not has_learned_judge(trained):
        return ""
    v = trained["validation"]
    on = (measured or {}).get("learned_judge", {})
    tested = (f"; on {on['n']} test readings (measure_judge) {_ratio('precision', on['learned'])} at recall "
              f"{_ratio('recall', on['learned'])}") if "learned" in on else "; not yet measured on test readings"
    return (f" consistency (judged): the rule (mwpgen/judge/rule.py), every fold; consistency (learned): the learned "
            f"judge where train_judge adopted one (not run elsewhere), precision {_ratio('precision', v)} at recall "
            f"{_ratio('recall', v)} on the validation readings that chose its threshold (in-sample){tested}.")


def judge_note(measured: dict | None) -> str:
    """What the consistency (judged) column measures, with the rule judge's precision and recall against the blind
    readings of the test part (the measure_judge stage's metrics/judge/<dataset>/fold<k>.json)."""
    if not measured or not measured.get("n"):
        return "consistency (judged): the share of problems the consistency judge (mwpgen/judge/rule.py) accepts."
    test = measured["test"]
    j, acc = test["judge"], test["acc_eq"]
    return (f"consistency (judged): the share of problems the consistency judge accepts ({measured['judge']}; "
            f"mwpgen/judge/rule.py, chosen on validation labels: studies/judge_choice). Against {test['n']} blind "
            f"readings of generated problems for {measured['dataset']} fold {measured['fold']} test equations "
            f"(data/labels/judge, {test['consistent']} consistent) its precision is {_ratio('precision', j)} and its "
            f"recall {_ratio('recall', j)} (ACC-eq's verdict: {_ratio('precision', acc)} and {_ratio('recall', acc)}; "
            f"95% bootstrap intervals over dataset problems; stage measure_judge)"
            f"{_share_against_readers(j.get('accepted'), test['consistent'], test['n'])}.")


def _how_fitted(trained: dict) -> str:
    """How train_judge fitted the judge of `trained` (metrics/judge_train): layers fine-tuned with the head, or a
    probe on frozen states (older metrics have no finetune_layers)."""
    layers = trained.get("finetune_layers") or 0
    if not layers:
        return "a linear head fitted on"
    seed = f", seed {trained['seed']} of {len(trained['seed_auc'])} by validation AUC," if trained.get("seed_auc") \
        else ""
    which = "all of them" if layers == trained["layer"] else f"the top {layers} of them"
    return f"{which} fine-tuned with a linear head{seed} on"


def learned_judge_note(measured: dict | None, trained: dict | None, scores: Sequence[dict]) -> list[str]:
    """What the consistency (learned) column measures, when some of `scores` have it: the learned judge's threshold,
    its figures on the validation readings that chose it (in-sample) beside the rule's, and from the measure_judge
    stage (`measured`) its figures on test readings beside the rule's on the same readings. [] otherwise."""
    if not _learned_scores(scores) or not has_learned_judge(trained):
        return []
    v, versus = trained["validation"], trained.get("against_rule", {})
    adopted = (f" It was adopted because its precision there is above the rule's, {versus['rule_precision']:.3f} at "
               f"recall {versus['rule_recall']:.3f} (in-sample for it as well).") \
        if versus.get("rule_recall") is not None and versus.get("rule_precision") is not None else ""
    gated = trained.get("gated_by_rule")
    text = (f"consistency (learned): the share of problems the learned judge accepts (mwpgen/judge/model.py, stage "
            f"train_judge: {trained['backbone']} read to layer {trained['layer']}, {_how_fitted(trained)} "
            f"{trained['readings']['train']['n']} blind readings of training-fold equations), only on folds where "
            f"train_judge adopted one (empty, not run, elsewhere; never averaged with the rule's column). It accepts "
            f"{'what the rule accepts (consistency (judged)) with ' if gated else ''}"
            f"p ≥ {v['threshold']:.3f}, the highest threshold reaching recall {trained['recall_target']} on "
            f"{v['n']} readings of validation equations; on those readings, which chose that threshold (in-sample, so "
            f"flattering), its precision is {_ratio('precision', v)} at recall {_ratio('recall', v)}, AUC "
            f"{_ratio('auc', v)} (metrics/judge_train).{adopted}")
    on = (measured or {}).get("learned_judge", {})
    if "learned" not in on:
        return [text + " Not yet measured on test readings (stage measure_judge)."]
    q, rule = on["learned"], on["rule"]
    return [text + f" Against {on['n']} blind readings of {measured['dataset']} fold {measured['fold']} test "
            f"equations ({on['consistent']} consistent; stage measure_judge; none chose anything) its precision is "
            f"{_ratio('precision', q)} and its recall {_ratio('recall', q)}, AUC {_ratio('auc', q)} (the rule on the "
            f"same readings: {_ratio('precision', rule)} and {_ratio('recall', rule)}; 95% bootstrap intervals over "
            f"dataset problems){_share_against_readers(q.get('accepted'), on['consistent'], on['n'])}."]


def _learned_cell(learned: Samples, samples: Samples, row: str, dataset: str) -> str:
    """A row's consistency (learned): the mean over the folds where train_judge adopted a judge only (never averaged
    with the rule's), "[fold k]" after it when the row's other folds had none; empty (the tables' "not run") where
    none had one."""
    values = learned.get((row, dataset, LEARNED))
    if not values:
        return ""
    mine, every = learned[(row, dataset, "folds")], samples.get((row, dataset, "folds"), [])
    return Cell(values).text() + ("" if set(mine) == set(every) else f" [{_folds(mine)}]")


def _chance_note(oracle: Sequence[dict]) -> str:
    equations: dict[str, dict[str, list[int]]] = {}
    for o in oracle:
        if o.get("chance_equation"):
            equations.setdefault(o["dataset"], {}).setdefault(o["chance_equation"], []).append(o["fold"])
    which = "; ".join(f"{d} " + ", ".join(f"`{eq}` (fold {','.join(map(str, sorted(folds)))})"
                                          for eq, folds in eqs.items()) for d, eqs in equations.items())
    return ("chance: the training fold's most frequent equation (canonical form) answered for every test problem"
            + (f": {which}." if which else "."))


def mark_subsamples(group: TableGroup, sizes: dict[str, tuple[int, int]]) -> None:
    """The titles of each dataset scored on a subsample read "(<dataset>*)", and a note gives its sizes. `sizes`:
    dataset -> (training, test) problems drawn per fold, 0 = all."""
    for dataset, (train, test) in sizes.items():
        marked = [t for t in group.tables if f"({dataset})" in t.title]
        for table in marked:
            table.title = table.title.replace(f"({dataset})", f"({dataset}*)")
        if marked:
            group.notes.append(f"{dataset}*: a seeded subsample of each fold, {train or 'all'} training and "
                               f"{test or 'all'} test problems (experiment.subsample); the paper's figures are of "
                               f"whole folds.")


# --- Table 2 ------------------------------------------------------------------------------------------------------

def _table2_columns() -> list[Column]:
    return [c for m in TABLE2_METRICS for c in metric_columns(m, m in paper.TABLE2_METRICS)]


def _table2_row(label: str, measured: dict[str, str], reported: dict[str, float]) -> tuple[str, list[str]]:
    """A row of Table 2: per metric ours, and the paper's beside it where the paper reports it."""
    cells = []
    for m in TABLE2_METRICS:
        cells.append(measured.get(m, ""))
        if m in paper.TABLE2_METRICS:
            cells.append(_paper(reported.get(m)))
    return label, cells


def _reference_rows(refs: Samples, dataset: str) -> list[tuple[str, list[str]]]:
    """The evaluator's figures on the test problems themselves (the paper's bracketed ACC-eq) and chance's."""
    def measured(prefix: str) -> dict[str, str]:
        return {m: _text(refs, (registry.EVALUATOR.name, dataset, f"{prefix}_{m}")) for m in ("acc_eq",
                                                                                             "acc_eq_equivalent")}
    rows = [(_table2_row("mwp2eq on the reference problems (oracle)", measured("oracle"),
                         {"acc_eq": paper.ORACLE_ACC_EQ[dataset]}), measured("oracle")),
            (_table2_row("chance: most frequent training equation", measured("chance"), {}), measured("chance"))]
    return [row for row, values in rows if any(values.values())]  # no evaluator run: no reference rows


def _instrument_caption(oracle: Sequence[dict], dataset: str) -> str:
    """" ACC-eq is read by an evaluator trained on 6,000 ...": said where the evaluator (ACC-eq's instrument) trained
    on another number of training problems than GPT-pre did on some fold of `dataset`; else ""."""
    runs = [o for o in oracle if o.get("dataset") == dataset and "n_train" in o and "generator_n_train" in o]
    if all(o["n_train"] == o["generator_n_train"] for o in runs):
        return ""

    def sizes(key: str) -> str:
        values = sorted({int(o[key]) for o in runs})
        return f"{values[0]:,}" if len(values) == 1 else f"{values[0]:,}-{values[-1]:,}"
    return (f" ACC-eq here is read by an evaluator trained on {sizes('n_train')} training problems a fold, the "
            f"generators on {sizes('generator_n_train')}: read each ACC-eq against the oracle row, its ceiling.")


def _not_run_notes(models: Sequence[str], ran: Sequence[str], skipped: dict[str, str], dataset: str,
                   base_model: str) -> list[str]:
    """One short note per model that did not run on `dataset` (why: under the group's notes), with what the paper
    reports for it."""
    notes = []
    for model in (m for m in models if m not in ran):
        reported = paper.TABLE2.get(PAPER_KEY.get(model, ""), {}).get(dataset)
        why = "not run (why: see the notes)" if model in skipped else "no scores yet (its evaluate stage has not run)"
        notes.append(f"{model_label(model, base_model)}: {why}."
                     + (f" The paper reports {_paper_figures(reported)}." if reported else ""))
    return notes


def _why_not_run(models: Sequence[str], skipped: dict[str, str], base_model: str) -> list[str]:
    return [f"{model_label(m, base_model)} was not run: {skipped[m]}" for m in models if m in skipped]


def table2(scores: list[dict], oracle: list[dict], models: Sequence[str], datasets: Sequence[str],
           deltas: dict[tuple[str, str], dict] | None = None, judge: dict | None = None, *,
           base_model: str, trained_judge: dict | None = None,
           only_on: dict[str, set[str]] | None = None) -> TableGroup:
    """Table 2 per dataset: language quality, ACC-eq (exact, equivalent) and the judged consistency of each model
    beside the paper's figures, the evaluator's and chance's ACC-eq; then each model's difference from GPT-pre.
    `oracle`: the evaluator's per-fold REFERENCE_METRICS (+ ``chance_equation``); `deltas`: deltas_vs_gpt_pre;
    `judge`: the judges' measurement (judge_note), `trained_judge`: the learned judge's training metrics
    (learned_judge_note); `base_model`: params.train.model; `only_on`: model -> the datasets it is reported on at
    all (ours tuned on readings: Arithmetic), so another dataset's table neither shows nor notes it."""
    deltas = deltas or {}
    samples, refs, skipped = aggregate(scores, TABLE2_METRICS), aggregate(oracle, REFERENCE_METRICS), \
        not_run_reasons(scores)
    learned = aggregate(_learned_scores(scores), (LEARNED,))  # its folds: those with a learned judge
    labels = {m: model_label(m, base_model) for m in models}
    tables = []
    for d in datasets:
        here = [m for m in models if only_on is None or m not in only_on or d in only_on[m]]
        ran = [m for m in here if any((m, d, x) in samples for x in TABLE2_METRICS)]
        rows = [_table2_row(labels[m] + _fold_mark(samples, m, d, ran),
                            {x: _text(samples, (m, d, x)) for x in TABLE2_METRICS}
                            | {LEARNED: _learned_cell(learned, samples, m, d)},
                            paper.TABLE2.get(PAPER_KEY.get(m, ""), {}).get(d, {})) for m in ran]
        caption = (f"{d}: our runs ({_run_caption(samples, ran, d)}; GPT, GPT-pre and ours are "
                   f"{base_model_name(base_model)}) beside the paper's 5-fold averages (GPT-2)."
                   + judged_caption([s for s in scores if s.get("dataset") == d], trained_judge, judge)
                   + _instrument_caption(oracle, d))
        tables.append(Table(f"Table 2 ({d}): language quality and equation accuracy", caption, _table2_columns(),
                            rows + _reference_rows(refs, d), _not_run_notes(here, ran, skipped, d, base_model)))
        compared = [m for m in ran if m != BASELINE]
        if compared and BASELINE in ran:
            tables.append(delta_table(
                f"Table 2 ({d}): difference from GPT-pre",
                f"{d}: each model minus {labels[BASELINE]} on the same{_paired_size(deltas, compared, d)} test "
                f"problems, with its 95% paired-bootstrap interval.",
                [(labels[m], deltas.get((m, d))) for m in compared]))
    shown = {k: v for k, v in deltas.items() if k[0] in models and k[1] in datasets}
    return TableGroup("Table 2: language quality and equation accuracy", tables, [
        "Our figures: mean ± population std over the folds named (no ± for one fold); paper: the paper's reported "
        "5-fold averages, for reference.",
        "ACC-eq: the evaluator's equation equals the input equation symbol for symbol (canonical form; the paper's "
        "metric, Sec. 4 \"Metrics\"); ACC-eq (equivalent): it is the same equation symbolically (e.g. num2 + num1 "
        "for num1 + num2). The paper reports the exact one only.",
        "oracle: the evaluator (mwp2eq) on the test problems themselves, the ceiling of ACC-eq (the paper's "
        "bracketed figure); " + _chance_note(oracle),
        judge_note(judge), *learned_judge_note(judge, trained_judge, scores), _delta_method("GPT-pre"),
        *_unpaired_notes(shown, labels),
        "Empty: not run; –: not computable (e.g. no novel problems). A model that could not be trained here is "
        "named under each dataset's table, never replaced by a stand-in.", *_why_not_run(models, skipped, base_model)])


# --- Table 3 ------------------------------------------------------------------------------------------------------

def table3(scores: list[dict], models: Sequence[str], datasets: Sequence[str], *, base_model: str) -> TableGroup:
    """Table 3 per dataset: % of generated problems not in the training fold (beside the paper's), ACC-eq on those
    and Dist-3."""
    samples = aggregate(scores, TABLE3_METRICS)
    columns = [c for m in TABLE3_METRICS for c in metric_columns(m, m == "novelty")]
    tables = []
    for d in datasets:
        ran = [m for m in models if (m, d, "novelty") in samples]
        rows = []
        for m in ran:
            novel = paper.TABLE3_PERCENT_NOVEL.get(PAPER_KEY.get(m, ""), {}).get(d)
            rows.append((model_label(m, base_model) + _fold_mark(samples, m, d, ran),
                         [_text(samples, (m, d, "novelty"), scale=100, digits=2), _paper(novel, 2),
                          _text(samples, (m, d, "acc_eq_novel")), _text(samples, (m, d, "dist3"))]))
        tables.append(Table(f"Table 3 ({d}): generated problems not in the training fold",
                            f"{d}: our runs ({_run_caption(samples, ran, d)}) beside the paper's % novel (5-fold "
                            f"averages; it reports seq2seq-tf and ours only).", columns, rows))
    return TableGroup("Table 3: novelty and diversity", tables, [
        "% novel: normalised generated text not found among the training fold's problems.",
        "ACC-eq (novel): ACC-eq over the novel problems only; Dist-3: distinct 3-grams / all 3-grams."])


# --- Table 4 ------------------------------------------------------------------------------------------------------

TABLE4_METRICS = (*DELTA_METRICS, LEARNED)  # BLEU-4, ACC-eq (exact, equivalent), consistency (judged, learned)


def table4(runs: dict[str, dict], row_labels: Sequence[str], datasets: Sequence[str], judge: dict | None = None,
           *, base_model: str, trained_judge: dict | None = None) -> TableGroup:
    """Table 4 (ablation) per dataset: BLEU-4, ACC-eq (exact, equivalent) and the judged consistency of each
    variant that ran (`runs`: statistics.ablation_runs) beside the paper's, and each variant's difference from the
    full model. Variants not run on a dataset are one note with the paper's figures."""
    every = [s for row in runs.values() for s in row["scores"]]
    samples, learned = aggregate(every, TABLE4_METRICS), aggregate(_learned_scores(every), (LEARNED,))
    columns = [c for m in TABLE4_METRICS for c in metric_columns(m, m in ("bleu4", "acc_eq"))] + \
        [Column("run", "run")]
    all_deltas = {(label, d): x for label, row in runs.items() for d, x in row["deltas"].items()}
    tables = []
    for d in datasets:
        ran = [label for label in row_labels if (label, d, "folds") in samples]
        rows = []
        for label in ran:
            reported = paper.TABLE4.get(label, {}).get(d, {})
            cells = [x for m in TABLE4_METRICS for x in
                     [_learned_cell(learned, samples, label, d) if m == LEARNED else _text(samples, (label, d, m))]
                     + ([_paper(reported.get(m))] if m in ("bleu4", "acc_eq") else [])]
            rows.append((label + _fold_mark(samples, label, d, ran), cells + [", ".join(runs[label]["source"])]))
        missing = [label for label in row_labels if label not in ran]
        notes = ["Not run here: " + "; ".join(
            f"{label}" + (f" (paper: {_paper_figures(paper.TABLE4[label][d])})" if d in paper.TABLE4.get(label, {})
                          else "") for label in missing)
            + ". Run them: python -m orchestration.pipeline --profile ablation."] if missing else []
        shown = [s for label in ran for s in runs[label]["scores"] if s.get("dataset") == d]
        tables.append(Table(f"Table 4 ({d}): ablation", f"{d}: each row is ours on {base_model_name(base_model)} "
                            f"with the switches of mwpgen/ours/ablation.py ({_run_caption(samples, ran, d)}), beside "
                            f"the paper's 5-fold averages (GPT-2); run: the model whose scores the row shows."
                            + judged_caption(shown, trained_judge, judge), columns, rows, notes, corner="variant"))
        compared = [label for label in ran if runs[label]["source"] != [FULL_MODEL]]
        if compared and "full model" in ran:
            tables.append(delta_table(f"Table 4 ({d}): difference from the full model",
                                      f"{d}: each variant minus the full model (ours) on the same"
                                      f"{_paired_size(all_deltas, compared, d)} test problems, with its 95% "
                                      f"paired-bootstrap interval.",
                                      [(label, runs[label]["deltas"].get(d)) for label in compared], corner="variant"))
    return TableGroup("Table 4: ablation (BLEU-4, ACC-eq and judged consistency)", tables, [
        "A row is one training run of \"ours\" with the switches of mwpgen/ours/ablation.py; rows that are the same "
        "run in the paper's table (context selection = full model w/o L_eq) share it, and GPT-pre answers "
        "\"keyword, noun+pronoun\" unless that variant itself ran.",
        judge_note(judge), *learned_judge_note(judge, trained_judge, every), _delta_method("the full model"),
        *_unpaired_notes(all_deltas, {})])


# --- Table 5 ------------------------------------------------------------------------------------------------------

def table5(examples: Sequence[dict], limit: int = 6, selection: dict[str, dict] | None = None) -> TableGroup:
    """Table 5: context keywords the selector picks (q > threshold) from real test problems, beside the heuristic
    noun and TF-IDF keywords of the same problems, one table per dataset and the paper's examples; the problems'
    text is listed under each table (in a cell it would make every line of the table a paragraph long).
    examples: dicts with dataset, id, problem, selected, noun, tfidf. selection: dataset -> selection_summary over
    all of its test problems."""
    columns = [Column("selected (q > 0.5)", "selected (q > 0.5)"), Column("noun", "noun"),
               Column("TF-IDF", "TF-IDF")]
    shown = list(examples[:limit])
    tables = []
    for d in dict.fromkeys(e["dataset"] for e in shown):
        mine = [e for e in shown if e["dataset"] == d]
        tables.append(Table(
            f"Table 5 ({d}): selected context keywords", _selection_caption(d, (selection or {}).get(d)), columns,
            [(e["id"], [" ".join(e["selected"]) or "(none)", " ".join(e["noun"]), " ".join(e["tfidf"])])
             for e in mine], [f"{e['id']}: {e['problem']}" for e in mine], corner="test problem"))
    tables.append(Table("Table 5 (paper): the paper's examples", "The paper's Table 5: keywords its selector picks.",
                        [columns[0]], [(f"example {i + 1}", [" ".join(k)]) for i, (_, k) in enumerate(paper.TABLE5)],
                        [f"example {i + 1}: {p}" for i, (p, _) in enumerate(paper.TABLE5)], corner="problem"))
    return TableGroup("Table 5: selected context keywords", tables, [
        "Selected keywords come from the trained selector of \"ours\" on each dataset's first test problems "
        "(results/generations/ours/*, column context); noun and TF-IDF: the heuristic keywords of the same "
        "problems (data/keywords)."])


def _selection_caption(dataset: str, st: dict | None) -> str:
    if not st or not st["problems"]:
        return f"{dataset}: the selector's picks for the first test problems."
    return (f"{dataset}: over all {st['problems']} test problems the selector picks {st['words_median']:g} words per "
            f"problem (median; mean {st['words_mean']:.1f}), none for {st['none_share']:.1%} of them; "
            f"{st['in_nouns']:.1%} of the selected words are among the problem's noun keywords and "
            f"{st['in_tfidf']:.1%} among its TF-IDF top 5 (the paper's Table 5: 2-8 words).")


# --- per fold -----------------------------------------------------------------------------------------------------

FOLD_METRICS = ("bleu4", "meteor", "rouge_l", "acc_eq", "acc_eq_equivalent", "consistency_judged")


def folds_table(scores: Sequence[dict], machines: dict[tuple[str, str, int], dict], models: Sequence[str], *,
                base_model: str) -> TableGroup:
    """Every (model, fold) row of Table 2 on its own, per dataset, with the machine and commit that trained it
    (`machines`: (model, dataset, fold) -> tracking.provenance.machine, as the training stage recorded it; absent
    for a run recorded before machines were): what the folds' mean ± std of Table 2 is made of."""
    columns = [Column(METRIC_NAMES[m], METRIC_NAMES[m]) for m in FOLD_METRICS] + \
        [Column("CPU kind", "CPU kind"), Column("commit", "commit")]
    by_key = {(s["model"], s["dataset"], int(s["fold"])): s for s in scores if not s.get("not_run")}
    tables = []
    for dataset in dict.fromkeys(s["dataset"] for s in by_key.values()):
        rows = []
        for model in models:
            for fold in sorted(k for m, d, k in by_key if (m, d) == (model, dataset)):
                s, where = by_key[(model, dataset, fold)], machines.get((model, dataset, fold)) or {}
                cells = [Cell([float(s[m])]).text() if s.get(m) is not None else "" for m in FOLD_METRICS]
                kind = where.get("kind", "")
                rows.append((f"{model_label(model, base_model)}, fold {fold}",
                             cells + [f"{kind} ({where['gpu']})" if where.get("gpu") else kind,
                                      where.get("commit", "") + (" (dirty)" if where.get("code_dirty") else "")]))
        tables.append(Table(f"Table 2 by fold ({dataset})", f"{dataset}: each model on each fold it ran, as the "
                            "fold's scores file has it; CPU kind and commit: where the model was trained.", columns,
                            rows, corner="model, fold"))
    return TableGroup("Table 2 by fold", tables, [
        "Table 2's cells are the mean ± population std of these rows. Results of one CPU kind are bit for bit the "
        "same when retrained there; AVX512-BF16 trains in bf16 autocast, AVX2-only in fp32, so the two round "
        "differently (README says by how much where it was measured). A commit marked (dirty) trained with tracked "
        "files changed from it: a profile run's params.yaml counts (MLflow's run tag mwpgen.git_dirty_paths names "
        "them)."])
