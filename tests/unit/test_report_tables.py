"""Report tables: one table per dataset with the paper's figure beside ours, differences with their intervals in
tables of their own, row labels that name the base model, narrow Markdown, LaTeX that typesets."""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from mwpgen.evaluation.statistics import (
    ablation_runs,
    deltas_vs_gpt_pre,
    observed_subsample,
    reported_datasets,
    selection_summary,
)
from mwpgen.evaluation.tables import (
    TABLE2_MODELS,
    base_model_name,
    latex_escape,
    mark_subsamples,
    model_label,
    table2,
    table3,
    table4,
    table5,
)
from mwpgen.ours.ablation import TABLE4_ROWS, table4_rows, variant_of

ROOT = Path(__file__).resolve().parents[2]
BASE = "smollm2-135m"
DATASETS = ["arithmetic", "mawps", "math23k"]
GPT_PRE, OURS = "GPT-pre (SmolLM2-135M, fine-tuned)", "ours (SmolLM2-135M)"
GLOVE = {"model": "seq2seq_rnn_glove", "dataset": "arithmetic", "fold": 0, "n": 0,
         "not_run": "GloVe download failed: offline"}
ORACLE = [{"model": "evaluator", "dataset": "arithmetic", "fold": 0, "oracle_acc_eq": 0.7,
           "oracle_acc_eq_equivalent": 0.75, "chance_acc_eq": 0.12, "chance_acc_eq_equivalent": 0.14,
           "chance_equation": "x = num1 + num2"}]
MARKDOWN_WIDTH = 160


def score(model, bleu, acc, fold=0, dataset="arithmetic", **extra):
    return {"model": model, "dataset": dataset, "fold": fold, "n": 298, "bleu4": bleu, "meteor": 0.2, "rouge_l": 0.3,
            "acc_eq": acc, "acc_eq_equivalent": acc + 0.05, "consistency_judged": acc - 0.1, "novelty": 0.5,
            "acc_eq_novel": 0.1, "dist3": 0.7, **extra}


def records(n: int, good: bool) -> list[dict]:
    """Prediction records as the evaluate stage writes them: a perfect 10-word hypothesis (good) or a poor one
    (bleu_stats: matches per n-gram order, n-grams per order, hypothesis and reference length)."""
    stats = [10, 9, 8, 7, 10, 9, 8, 7, 10, 10] if good else [5, 2, 1, 0, 10, 9, 8, 7, 10, 10]
    return [{"id": f"p{i}", "bleu_stats": stats, "acc_eq": good or i % 3 == 0, "acc_eq_equivalent": good or i % 2 == 0,
             "judged": good or i % 4 == 0} for i in range(n)]


def every_model_scored(folds=(0,)) -> list[dict]:
    return [score(m, 0.1 + 0.01 * k, 0.2 + 0.01 * k, fold=f, dataset=d) for d in DATASETS for f in folds
            for k, m in enumerate(TABLE2_MODELS) if m != "seq2seq_rnn_glove"] + [GLOVE]


def full_table2(folds=(0,)):
    predictions = {(m, d, f): records(40, m == "ours") for m in ("gpt_pre", "ours", "gpt") for d in DATASETS
                   for f in folds}
    return table2(every_model_scored(folds), ORACLE, TABLE2_MODELS, DATASETS, deltas_vs_gpt_pre(predictions, 2021),
                  base_model=BASE)


# --- Table 2 ------------------------------------------------------------------------------------------------------

def test_table2_is_one_table_per_dataset_and_one_of_differences_per_dataset():
    group = full_table2()
    assert [t.title for t in group.tables] == [f"Table 2 ({d}): {what}" for d in DATASETS
                                               for what in ("language quality and equation accuracy",
                                                            "difference from GPT-pre")]
    main = group.table("Table 2 (arithmetic): language")
    assert [c.name for c in main.columns] == ["BLEU-4", "BLEU-4 (paper)", "METEOR", "METEOR (paper)", "ROUGE-L",
                                              "ROUGE-L (paper)", "ACC-eq", "ACC-eq (paper)", "ACC-eq (equivalent)",
                                              "consistency (judged)", "consistency (learned)"]
    cells = main.cells()
    assert cells[GPT_PRE]["BLEU-4"] == "0.140" and cells[GPT_PRE]["BLEU-4 (paper)"] == "0.316"  # ours beside paper's
    assert cells[OURS]["ACC-eq (paper)"] == "0.453" and cells[OURS]["ACC-eq (equivalent)"] == "0.300"
    assert cells["mwp2eq on the reference problems (oracle)"]["ACC-eq"] == "0.700"
    assert cells["mwp2eq on the reference problems (oracle)"]["ACC-eq (paper)"] == "0.769"
    assert cells["chance: most frequent training equation"]["ACC-eq (equivalent)"] == "0.140"
    assert "fold 0, 298 test problems per fold" in main.caption and "SmolLM2-135M" in main.caption


def test_a_table_says_when_its_evaluator_read_more_of_the_fold_than_the_generators():
    oracle = [{**ORACLE[0], "n_train": 1088, "generator_n_train": 1088},
              {**ORACLE[0], "dataset": "mawps", "n_train": 6000, "generator_n_train": 900}]
    group = table2(every_model_scored(), oracle, TABLE2_MODELS, DATASETS, base_model=BASE)
    said = "ACC-eq here is read by an evaluator trained on 6,000 training problems a fold, the generators on 900"
    assert said in group.table("Table 2 (mawps): language").caption
    assert "ACC-eq here is read" not in group.table("Table 2 (arithmetic): language").caption
    assert "ACC-eq here is read" not in full_table2().table("Table 2 (mawps): language").caption  # sizes unknown


def test_the_differences_from_gpt_pre_carry_their_95_percent_intervals():
    delta = full_table2().table("Table 2 (mawps): difference").cells()
    assert GPT_PRE not in delta  # the baseline is not compared with itself
    interval = re.compile(r"^([+−]\d\.\d{3}) \[([+−]\d\.\d{3}), ([+−]\d\.\d{3})\]$")
    number = lambda s: float(s.replace("−", "-"))  # noqa: E731 — a one-line local helper
    for column in ("Δ BLEU-4", "Δ ACC-eq", "Δ ACC-eq (equivalent)", "Δ consistency (judged)"):
        mean, low, high = map(number, interval.match(delta[OURS][column]).groups())
        assert 0 < low <= mean <= high  # a clearly better model: the interval excludes 0
    gpt = delta["GPT (SmolLM2-135M architecture, from scratch)"]["Δ BLEU-4"]
    assert gpt == "+0.000 [+0.000, +0.000]"  # GPT's records are a copy of GPT-pre's here
    assert delta["seq2seq-tf (transformer, from scratch)"]["Δ ACC-eq"] == "–"  # no predictions to pair


TRAINED_JUDGE = {"dataset": "arithmetic", "fold": 0, "backbone": "models/evaluator/arithmetic/fold0 (the fold's "
                 "evaluator)", "layer": 12, "recall_target": 0.5, "readings": {"train": {"n": 807}}, "adopted": True,
                 "gated_by_rule": True,
                 "validation": {"n": 969, "right": 183, "auc": 0.8, "threshold": 0.2345, "precision": 0.467,
                                "recall": 0.5, "accepted": 196},
                 "against_rule": {"rule_precision": 0.41, "rule_recall": 0.55, "learned_precision": 0.467,
                                  "adopted": True}}
MEASURED_JUDGE = {"dataset": "arithmetic", "fold": 0, "n": 656, "judge": "rule",
                  "test": {"n": 300, "consistent": 44,
                           "judge": {"precision": 0.5, "recall": 0.568, "precision_ci": [0.4, 0.6],
                                     "recall_ci": [0.4, 0.7], "accepted": 50},
                           "acc_eq": {"precision": 0.3, "recall": 0.8, "precision_ci": None, "recall_ci": None}},
                  "learned_judge": {"n": 2027, "consistent": 380,
                                    "learned": {"auc": 0.78, "precision": 0.41, "recall": 0.52, "accepted": 482,
                                                "precision_ci": [0.37, 0.45], "recall_ci": [0.47, 0.57]},
                                    "rule": {"precision": 0.45, "recall": 0.55, "precision_ci": [0.4, 0.5],
                                             "recall_ci": [0.5, 0.6]}}}


def _note(group, start: str) -> str:
    return next(n for n in group.notes if n.startswith(start))


def test_the_judged_column_stays_the_rules_and_the_learned_judge_has_its_own():
    scored = [score("gpt_pre", 0.1, 0.2, consistency_learned=0.3), score("ours", 0.1, 0.4, consistency_learned=0.5),
              score("gpt_pre", 0.1, 0.4, fold=1),  # a fold without a learned judge
              score("gpt_pre", 0.1, 0.2, dataset="mawps")]
    group = table2(scored, [], TABLE2_MODELS, ["arithmetic", "mawps"], judge=MEASURED_JUDGE, base_model=BASE,
                   trained_judge=TRAINED_JUDGE)
    arithmetic = group.table("Table 2 (arithmetic): language")
    cells = arithmetic.cells()
    assert cells[GPT_PRE]["consistency (judged)"] == "0.200±0.100"  # the rule, over both folds
    assert cells[GPT_PRE]["consistency (learned)"] == "0.300 [fold 0]"  # the learned judge's fold only
    assert cells[OURS + " [fold 0]"]["consistency (learned)"] == "0.500"
    assert group.table("Table 2 (mawps): language").cells()[GPT_PRE]["consistency (learned)"] == ""  # not run
    caption = " ".join(arithmetic.caption.split())
    assert "consistency (judged): the rule (mwpgen/judge/rule.py), every fold" in caption
    assert ("the learned judge where train_judge adopted one (not run elsewhere), precision 0.467 at recall 0.500 on "
            "the validation readings that chose its threshold (in-sample); on 2027 test readings (measure_judge) "
            "0.410 [0.37, 0.45] at recall 0.520 [0.47, 0.57]") in caption
    assert "learned" not in group.table("Table 2 (mawps): language").caption  # no learned share there
    rule = _note(group, "consistency (judged)")
    assert "Against 300 blind readings" in rule and "learned" not in rule
    # the rule accepts 50 of 300 where readers found 44 right: it overstates
    assert "so its share overstates how many problems a reader finds right (it accepts 50 of 300" in rule
    learned = _note(group, "consistency (learned)")
    assert "p ≥ 0.234" in learned and "807 blind readings" in learned and "(in-sample, so flattering)" in learned
    assert "its precision there is above the rule's, 0.410 at recall 0.550" in learned
    assert "It accepts what the rule accepts (consistency (judged)) with p ≥ 0.234" in learned
    assert "Against 2027 blind readings" in learned and "precision is 0.410 [0.37, 0.45]" in learned
    assert "the rule on the same readings: 0.450 [0.40, 0.50] and 0.550 [0.50, 0.60]" in learned
    # the learned judge accepts 482 of 2027 where readers found 380 right: it overstates too
    assert "overstates how many problems a reader finds right (it accepts 482 of 2027, readers found 380" in learned
    runs = ablation_runs([score("ours", 0.1, 0.2, consistency_learned=0.25)], lambda m: variant_of(m, []),
                         table4_rows, ["arithmetic"], [0])
    four = table4(runs, TABLE4_ROWS, ["arithmetic"], MEASURED_JUDGE, base_model=BASE, trained_judge=TRAINED_JUDGE)
    assert four.tables[0].cells()["full model"]["consistency (learned)"] == "0.250"
    assert any(n.startswith("consistency (learned)") for n in four.notes)
    assert "precision 0.467 at recall 0.500" in four.tables[0].caption


def test_the_learned_note_says_how_the_judge_was_fitted():
    scored = [score("gpt_pre", 0.1, 0.2, consistency_learned=0.3)]

    def learned(trained):
        group = table2(scored, [], TABLE2_MODELS, ["arithmetic"], judge=MEASURED_JUDGE, base_model=BASE,
                       trained_judge=trained)
        return _note(group, "consistency (learned)")
    assert "read to layer 12, a linear head fitted on 807 blind readings" in learned(TRAINED_JUDGE)  # a probe
    tuned = {**TRAINED_JUDGE, "finetune_layers": 12, "seed": 1, "seed_auc": {"0": 0.86, "1": 0.862}}
    assert ("read to layer 12, all of them fine-tuned with a linear head, seed 1 of 2 by validation AUC, on 807 "
            "blind readings") in learned(tuned)
    assert "the top 4 of them fine-tuned with a linear head on 807" in learned(
        {**TRAINED_JUDGE, "finetune_layers": 4, "seed": None, "seed_auc": {}})


def test_the_overstates_sentence_follows_the_figures():
    fewer = {**MEASURED_JUDGE, "test": {**MEASURED_JUDGE["test"],
                                        "judge": {**MEASURED_JUDGE["test"]["judge"], "accepted": 30}}}
    group = table2([score("gpt_pre", 0.1, 0.2)], [], TABLE2_MODELS, ["arithmetic"], judge=fewer, base_model=BASE)
    assert "so its share understates how many problems a reader finds right (it accepts 30 of 300" in \
        _note(group, "consistency (judged)")


def test_without_an_adopted_learned_judge_the_tables_are_the_rules():
    from mwpgen.evaluation.tables import has_learned_judge

    kept_rule = {**TRAINED_JUDGE, "adopted": False}
    assert has_learned_judge(TRAINED_JUDGE) and not has_learned_judge(kept_rule) and not has_learned_judge(None)
    assert not has_learned_judge({"dataset": "mawps", "fold": 0, "n": 0, "no_labels": "..."})
    for trained in (kept_rule, None, TRAINED_JUDGE):  # scores made before any learned judge: the rule's only
        group = table2([score("gpt_pre", 0.1, 0.2)], [], TABLE2_MODELS, ["arithmetic"], judge=MEASURED_JUDGE,
                       base_model=BASE, trained_judge=trained)
        assert not any("learned" in n for n in group.notes) and "learned" not in group.tables[0].caption
        assert group.tables[0].cells()[GPT_PRE]["consistency (learned)"] == ""  # empty: not run


def test_report_json_keeps_the_learned_judges_figures_beside_the_rules():
    from mwpgen.evaluation.statistics import judge_summary

    q = {"accepted": 30, "precision": 0.5, "recall": 0.568, "precision_ci": [0.4, 0.6], "recall_ci": None}
    part = {"n": 300, "consistent": 44, "judge": q, "acc_eq": q, "learned": q}
    learned = {**MEASURED_JUDGE["learned_judge"], "learned": {**MEASURED_JUDGE["learned_judge"]["learned"],
                                                              "precision_at_recall_0.5": 0.4, "accepted": 240}}
    summary = judge_summary({**MEASURED_JUDGE, "validation": part, "test": part, "learned_judge": learned},
                            TRAINED_JUDGE)
    assert summary["learned_validation"]["precision"] == 0.467 and summary["learned_validation"]["threshold"] == 0.2345
    assert summary["learned_validation"]["rule_precision"] == 0.41 and summary["learned_validation"]["adopted"] == 1
    assert summary["learned_validation"]["rule_recall"] == 0.55 and summary["learned_validation"]["gated_by_rule"] == 1
    assert summary["learned_test"]["auc"] == 0.78 and summary["learned_test"]["rule"] == {"precision": 0.45,
                                                                                          "recall": 0.55}
    assert summary["test"]["learned"]["precision_low"] == 0.4 and summary["validation"]["judge"]["accepted"] == 30
    assert judge_summary(None, None) == {} and set(judge_summary(None, TRAINED_JUDGE)) == {"learned_validation"}


def test_a_model_that_did_not_run_is_a_note_not_a_row_of_empty_cells():
    group = table2([score("gpt_pre", 0.1, 0.2), GLOVE], [], TABLE2_MODELS, ["arithmetic"], base_model=BASE)
    main = group.tables[0]
    assert [label for label, _ in main.rows] == [GPT_PRE]
    note = next(n for n in main.notes if n.startswith("seq2seq-rnn + GloVe"))
    assert "not run" in note and "BLEU-4 0.351" in note  # the paper's figures stay alongside
    assert sum("GloVe download failed: offline" in n for n in group.notes) == 1  # the reason, once
    assert "not run" not in "".join(line for line in group.markdown().splitlines() if line.startswith("|"))
    assert not any("GloVe" in label for t in table3([GLOVE], TABLE2_MODELS, ["arithmetic"], base_model=BASE).tables
                   for label, _ in t.rows)


def test_row_labels_name_the_base_model_and_how_it_is_used():
    assert model_label("gpt_pre", BASE) == GPT_PRE
    assert model_label("gpt", BASE) == "GPT (SmolLM2-135M architecture, from scratch)"
    assert model_label("ours", BASE) == OURS
    assert model_label("gpt_pre", "openai-community/gpt2-large") == "GPT-pre (GPT-2 large, fine-tuned)"
    assert model_label("seq2seq_tf", BASE) == "seq2seq-tf (transformer, from scratch)"
    assert base_model_name("/models/my-lm/") == "my-lm"
    md = full_table2().markdown()
    for label in (GPT_PRE, OURS, "GPT (SmolLM2-135M architecture, from scratch)"):
        assert f"| {label} |" in md
    assert "| GPT-pre |" not in md and "| ours |" not in md


def test_a_row_averaging_other_folds_than_the_rest_says_which():
    scores = [score("gpt_pre", 0.1, 0.2), score("gpt_pre", 0.3, 0.4, fold=1), score("ours", 0.2, 0.3)]
    cells = table2(scores, [], TABLE2_MODELS, ["arithmetic"], base_model=BASE).tables[0].cells()
    assert cells[GPT_PRE]["BLEU-4"] == "0.200±0.100" and f"{OURS} [fold 0]" in cells


def test_markdown_lines_stay_narrow():
    for group in (full_table2(), full_table2(folds=(0, 1, 2, 3, 4)),
                  table3(every_model_scored(), TABLE2_MODELS, DATASETS, base_model=BASE), ablation_table4()):
        long = [line for line in group.markdown().splitlines() if len(line) > MARKDOWN_WIDTH + 10 * ("±" in line)]
        assert not long, f"{len(long)} lines longer than the bound, e.g. {long[0]!r}"


# --- Table 4 ------------------------------------------------------------------------------------------------------

def ablation_table4():
    predictions = {("ours", "arithmetic", 0): records(30, False),
                   ("ours-eq_softmax", "arithmetic", 0): records(30, True)}
    scores = [score("ours", 0.30, 0.40), score("ours", 0.20, 0.60, fold=1), score("ours-selector", 0.11, 0.22),
              score("ours-eq_softmax", 0.9, 0.95), score("ours", 0.9, 0.9, fold=2)]  # fold 2: not the ablation's
    runs = ablation_runs(scores, lambda m: variant_of(m, ["noun"]), table4_rows, ["arithmetic"], [0, 1], predictions,
                         seed=2021)
    return table4(runs, TABLE4_ROWS, ["arithmetic"], base_model=BASE)


def test_table4_is_a_table_per_dataset_with_the_papers_figures_and_one_of_differences():
    group = ablation_table4()
    main, delta = group.tables
    assert main.title == "Table 4 (arithmetic): ablation" and delta.title.endswith("difference from the full model")
    cells = main.cells()
    assert cells["full model"]["BLEU-4"] == "0.250±0.050" and cells["full model"]["BLEU-4 (paper)"] == "0.338"
    # one run answers both rows the paper lists as the same setting
    assert cells["context selection [fold 0]"]["BLEU-4"] == cells["full model w/o L_eq [fold 0]"]["BLEU-4"] == "0.110"
    assert cells["context selection [fold 0]"]["run"] == "ours-selector"
    assert "SmolLM2-135M" in main.caption
    note = next(n for n in main.notes if n.startswith("Not run here"))
    assert "keyword, TF-IDF (paper: BLEU-4 0.313, ACC-eq 0.424)" in note and "L_eq (softmax)" not in note
    differences = delta.cells()
    assert "full model" not in differences
    assert differences["L_eq (softmax)"]["Δ BLEU-4"].startswith("+")
    assert differences["context selection"]["Δ ACC-eq"] == "–"  # no predictions to compare


# --- Tables 3 and 5 -----------------------------------------------------------------------------------------------

def test_table3_per_dataset_beside_the_papers_percent_novel():
    group = table3(every_model_scored(), TABLE2_MODELS, DATASETS, base_model=BASE)
    cells = group.table("Table 3 (mawps)").cells()
    assert cells[OURS]["% novel"] == "50.00" and cells[OURS]["% novel (paper)"] == "63.77"
    assert cells[GPT_PRE]["% novel (paper)"] == "" and cells[GPT_PRE]["Dist-3"] == "0.700"


def test_table5_lists_selected_and_heuristic_keywords_with_the_papers_examples():
    group = table5([{"dataset": "arithmetic", "id": "7", "problem": "Joan has num1 apples .", "selected": ["Joan"],
                     "noun": ["apples"], "tfidf": ["Joan", "apples"]},
                    {"dataset": "mawps", "id": "9", "problem": "x", "selected": [], "noun": [], "tfidf": []}])
    arithmetic = group.table("Table 5 (arithmetic)")
    assert arithmetic.cells()["7"] == {"selected (q > 0.5)": "Joan", "noun": "apples", "TF-IDF": "Joan apples"}
    assert arithmetic.notes == ["7: Joan has num1 apples ."]  # the problem's text, under the table
    assert group.table("Table 5 (mawps)").cells()["9"]["selected (q > 0.5)"] == "(none)"
    assert group.table("Table 5 (paper)").cells()["example 1"]["selected (q > 0.5)"] == "Emily cards collects father"


def test_table5_says_what_the_selector_picks_over_the_whole_fold():
    picks = [["Joan", "apples"], [], [], ["boxes"]]
    nouns = [["apples", "beach"], ["jar"], [], ["Boxes", "candies"]]
    tfidf = [["joan"], ["jar"], [], ["candies"]]
    st = selection_summary(picks, nouns, tfidf)
    assert (st["problems"], st["words_median"], st["words_mean"], st["none_share"]) == (4, 0.5, 0.75, 0.5)
    assert st["in_nouns"] == 2 / 3 and st["in_tfidf"] == 1 / 3  # apples, boxes (any case); joan
    example = {"dataset": "arithmetic", "id": "1", "problem": "p", "selected": [], "noun": [], "tfidf": []}
    caption = table5([example], selection={"arithmetic": st}).tables[0].caption
    assert "0.5 words per problem (median; mean 0.8), none for 50.0% of them" in caption
    assert "66.7% of the selected words are among the problem's noun keywords and 33.3% among its TF-IDF" in caption


# --- formats ------------------------------------------------------------------------------------------------------

def _tabular_widths(tex: str) -> list[tuple[int, list[int]]]:
    """Per tabular: the columns its spec declares, and the columns each of its rows fills (\\multicolumn{k}: k)."""
    out = []
    for spec, body in re.findall(r"\\begin\{tabular\}\{((?:[^{}]|\{[^{}]*\})*)\}(.*?)\\end\{tabular\}", tex, re.S):
        declared = len(re.findall(r"p\{[^}]*\}|[lcr]", spec))  # p{4.2cm} first: its "c" is no column
        rows = [line[:-2] for line in (x.strip() for x in body.splitlines()) if line.endswith(r"\\")]
        widths = []
        for row in rows:
            cells = re.split(r"(?<!\\)&", row)
            widths.append(sum(int(m.group(1)) if (m := re.match(r"\s*\\multicolumn\{(\d+)\}", c)) else 1
                              for c in cells))
        out.append((declared, widths))
    return out


def all_groups():
    examples = [{"dataset": "arithmetic", "id": "7", "problem": "Joan has 50% & more_apples", "selected": ["Joan"],
                 "noun": ["apples"], "tfidf": ["Joan"]}]
    return [full_table2(), full_table2(folds=(0, 1)), table3(every_model_scored(), TABLE2_MODELS, DATASETS,
                                                             base_model=BASE), ablation_table4(), table5(examples)]


def test_every_latex_row_fills_the_columns_its_tabular_declares():
    for group in all_groups():
        widths = _tabular_widths(group.latex())
        assert widths and all(rows for _, rows in widths)
        for declared, rows in widths:
            assert set(rows) == {declared}, f"{group.title}: {declared} columns declared, rows fill {rows}"
    # the check itself catches a row with a cell too many, and counts \multicolumn
    assert _tabular_widths(r"\begin{tabular}{p{4cm}cc}" "\na & b & c & d \\\\\n\\end{tabular}") == [(3, [4])]
    assert _tabular_widths(r"\begin{tabular}{lcc}" "\na & \\multicolumn{2}{c}{b} \\\\\n\\end{tabular}") == [(3, [3])]


def test_latex_escapes_specials_and_is_ascii():
    assert latex_escape("L_eq 50% & `x = num1_2`") == r"L\_eq 50\% \& \texttt{x = num1\_2}"
    assert latex_escape("−0.1 ± 0.2 Δ") == r"$-$0.1 $\pm$ 0.2 $\Delta$"
    assert all(group.latex().isascii() for group in all_groups())
    assert r"7: Joan has 50\% \& more\_apples" in all_groups()[-1].latex()  # a problem's text, under Table 5


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no pdflatex (apt-get install texlive-latex-base)")
def test_the_latex_typesets(tmp_path):
    for i, group in enumerate(all_groups()):
        (tmp_path / f"t{i}.tex").write_text(group.latex(), encoding="utf-8")
        doc = tmp_path / f"doc{i}.tex"
        doc.write_text(f"\\documentclass{{article}}\n\\begin{{document}}\n\\input{{t{i}.tex}}\n\\end{{document}}\n")
        done = subprocess.run(["pdflatex", "-halt-on-error", "-interaction=nonstopmode", doc.name], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{group.title}:\n" + done.stdout[-2000:]


def test_csv_is_long_form_one_line_per_cell():
    group = full_table2()
    rows = list(csv.reader(io.StringIO(group.csv())))
    assert rows[0] == ["table", "row", "column", "value"] and all(len(r) == 4 for r in rows)
    assert ["Table 2 (arithmetic): language quality and equation accuracy", GPT_PRE, "BLEU-4 (paper)", "0.316"] in rows


def test_a_subsampled_dataset_is_marked_in_its_titles_and_its_sizes_noted():
    t = table2([score("gpt_pre", 0.1, 0.2), score("gpt_pre", 0.3, 0.4, dataset="math23k")], [], TABLE2_MODELS,
               ["arithmetic", "math23k"], base_model=BASE)
    mark_subsamples(t, {"math23k": (900, 300)})
    assert [x.title.split(":")[0] for x in t.tables] == ["Table 2 (arithmetic)", "Table 2 (math23k*)"]
    assert any(n.startswith("math23k*: a seeded subsample of each fold, 900 training and 300 test") for n in t.notes)
    before = [x.title for x in t.tables], list(t.notes)
    mark_subsamples(t, {"mawps": (0, 50)})  # a dataset the table does not show: nothing changes
    assert ([x.title for x in t.tables], t.notes) == before


# --- what the report reads ----------------------------------------------------------------------------------------

def test_the_report_stage_reads_no_study_results():
    report = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]["report"]
    assert not [d for d in report["deps"] if str(d).startswith(("docs/", "studies/", "bench/"))]
    assert "selector_seeds" not in (ROOT / "flows" / "report.py").read_text(encoding="utf-8")


def test_datasets_another_profile_scored_join_the_tables_in_the_papers_order():
    assert reported_datasets(["arithmetic"], {"math23k"}) == ["arithmetic", "math23k"]
    assert reported_datasets(["arithmetic"], {"math23k", "mawps"}) == ["arithmetic", "mawps", "math23k"]
    assert reported_datasets(["math23k", "arithmetic"], set()) == ["arithmetic", "math23k"]
    assert reported_datasets(["arithmetic"], set()) == ["arithmetic"]


def test_a_dataset_from_another_profile_is_marked_by_the_sizes_its_runs_recorded():
    assert observed_subsample(900, 300, n_train_full=18_297, n_test_full=4_614) == (900, 300)
    assert observed_subsample(1_760, 465, n_train_full=1_760, n_test_full=465) is None  # whole fold
    assert observed_subsample(500, 465, n_train_full=1_760, n_test_full=465) == (500, 0)  # training subsample only


def test_the_by_fold_table_has_a_row_per_model_and_fold_with_its_machine():
    from mwpgen.evaluation.tables import folds_table

    scores = [{"model": m, "dataset": "arithmetic", "fold": k, "bleu4": 0.1 + k / 100, "acc_eq": 0.3,
               "consistency_judged": 0.2} for m in ("gpt_pre", "ours") for k in (0, 1)]
    scores.append({"model": "seq2seq_rnn_glove", "dataset": "arithmetic", "fold": 0, "not_run": "no GloVe"})
    machines = {("ours", "arithmetic", 1): {"kind": "AVX2-only", "commit": "abc123", "code_dirty": True},
                ("gpt_pre", "arithmetic", 0): {"kind": "AVX512-BF16", "gpu": "H200", "commit": "def456"}}
    group = folds_table(scores, machines, ["seq2seq_rnn_glove", "gpt_pre", "ours"], base_model="smollm2-135m")
    cells = group.table("Table 2 by fold (arithmetic)").cells()
    labels = list(cells)
    assert len(labels) == 4 and labels[0].endswith("fold 0") and "GPT-pre" in labels[0]
    ours1 = cells[labels[3]]
    assert (ours1["BLEU-4"], ours1["ACC-eq"], ours1["METEOR"]) == ("0.110", "0.300", "")
    assert (ours1["CPU kind"], ours1["commit"]) == ("AVX2-only", "abc123 (dirty)")
    assert cells[labels[0]]["CPU kind"] == "AVX512-BF16 (H200)"
    assert cells[labels[2]]["CPU kind"] == ""  # recorded before machines were
