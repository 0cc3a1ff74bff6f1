"""Report tables: not-run rows, Table 4 from ablation runs, Table 5 keyword samples."""

from __future__ import annotations

from mwpgen.ours.ablation import TABLE4_ROWS, table4_rows, variant_of
from mwpgen.evaluation.report import (TABLE2_MODELS, ablation_runs, mark_subsamples, observed_subsample,
                                      reported_datasets, selection_summary, table2, table3, table4, table5)


def score(model, bleu, acc, fold=0, dataset="arithmetic", **extra):
    return {"model": model, "dataset": dataset, "fold": fold, "bleu4": bleu, "meteor": 0.2, "rouge_l": 0.3,
            "acc_eq": acc, "novelty": 0.5, "acc_eq_novel": 0.1, "dist3": 0.7, **extra}


def test_not_run_model_is_marked_with_its_reason_and_never_scored():
    scores = [score("gpt_pre", 0.1, 0.2),
              {"model": "seq2seq_rnn_glove", "dataset": "arithmetic", "fold": 0, "n": 0,
               "not_run": "GloVe download failed: offline"}]
    md = table2(scores, [], TABLE2_MODELS, ["arithmetic"]).markdown()
    glove_row = next(line for line in md.splitlines() if line.startswith("| seq2seq-rnn + GloVe (this run)"))
    assert "not run: GloVe download failed: offline" in glove_row and "0." not in glove_row
    assert "| seq2seq-rnn + GloVe (paper) | 0.351" in md  # the paper's figures stay alongside
    assert "seq2seq-rnn + GloVe (this run)" not in table3(scores, TABLE2_MODELS, ["arithmetic"]).markdown()


def test_table4_maps_variants_to_rows_and_averages_folds():
    scores = [score("ours", 0.30, 0.40), score("ours", 0.20, 0.60, fold=1),
              score("ours-selector", 0.11, 0.22), score("gpt_pre", 0.9, 0.9),
              score("ours", 0.9, 0.9, fold=2)]  # a fold the ablation did not run: left out of Table 4
    t = table4(ablation_runs(scores, variant_of, table4_rows, ["arithmetic"], [0, 1]), TABLE4_ROWS, ["arithmetic"])
    rows = {label: cells for label, cells in t.rows}
    assert rows["full model (this run)"][:2] == ["0.250 ± 0.050", "0.500 ± 0.100"]
    # columns per dataset: BLEU-4, ACC-eq, ACC-eq (equivalent), consistency (judged), four Δ vs the full model; runs
    assert rows["full model (this run)"][2:] == ["", "", *["baseline"] * 4, "arit:0 arit:1 from ours"]
    assert rows["context selection (this run)"][4:8] == ["–"] * 4  # no predictions to compare
    # one run answers both rows the paper lists as the same setting
    assert rows["context selection (this run)"][:2] == rows["full model w/o L_eq (this run)"][:2] == ["0.110", "0.220"]
    assert "keyword, TF-IDF (this run)" not in rows and rows["keyword, TF-IDF (paper)"][:2] == ["0.313", "0.424"]


def test_table5_lists_selected_and_heuristic_keywords_with_the_papers_examples():
    t = table5([{"dataset": "arithmetic", "id": "7", "problem": "Joan has num1 apples .", "selected": ["Joan"],
                 "noun": ["apples"], "tfidf": ["Joan", "apples"]},
                {"dataset": "mawps", "id": "9", "problem": "x", "selected": [], "noun": [], "tfidf": []}])
    rows = dict(t.rows)
    assert rows["arithmetic 7"] == ["Joan has num1 apples .", "Joan", "apples", "Joan apples"]
    assert rows["mawps 9"][1] == "(none)"
    assert rows["paper example 1"][1] == "Emily cards collects father"


def test_table5_notes_what_the_selector_picks_over_the_whole_fold():
    picks = [["Joan", "apples"], [], [], ["boxes"]]
    nouns = [["apples", "beach"], ["jar"], [], ["Boxes", "candies"]]
    tfidf = [["joan"], ["jar"], [], ["candies"]]
    st = selection_summary(picks, nouns, tfidf)
    assert (st["problems"], st["words_median"], st["words_mean"], st["none_share"]) == (4, 0.5, 0.75, 0.5)
    assert st["in_nouns"] == 2 / 3 and st["in_tfidf"] == 1 / 3  # apples, boxes (any case); joan
    t = table5([], selection={"arithmetic": st, "mawps": selection_summary([], [], [])})
    note = next(n for n in t.notes if n.startswith("arithmetic"))
    assert "0.5 words selected per problem (median; mean 0.8), none for 50.0% of them" in note
    assert "66.7% of the selected words are among the problem's noun keywords and 33.3% among its TF-IDF top 5" in note
    assert not any(n.startswith("mawps") for n in t.notes)


def test_a_subsampled_dataset_is_marked_in_every_column_and_its_sizes_noted():
    scores = [score("gpt_pre", 0.1, 0.2), score("gpt_pre", 0.3, 0.4, dataset="math23k")]
    t = table2(scores, [], TABLE2_MODELS, ["arithmetic", "math23k"])
    mark_subsamples(t, {"math23k": (900, 300)})
    assert "math23k* BLEU-4" in t.columns and "arithmetic BLEU-4" in t.columns
    assert not any(c.startswith("math23k ") for c in t.columns)
    assert any(n.startswith("math23k*: a seeded subsample of each fold, 900 training and 300 test") for n in t.notes)
    before = list(t.columns)
    mark_subsamples(t, {"mawps": (0, 50)})  # a dataset the table does not show: nothing changes
    assert t.columns == before


def test_datasets_another_profile_scored_join_the_tables_in_the_papers_order():
    assert reported_datasets(["arithmetic"], {"math23k"}) == ["arithmetic", "math23k"]
    assert reported_datasets(["arithmetic"], {"math23k", "mawps"}) == ["arithmetic", "mawps", "math23k"]
    assert reported_datasets(["math23k", "arithmetic"], set()) == ["arithmetic", "math23k"]
    assert reported_datasets(["arithmetic"], set()) == ["arithmetic"]


def test_a_dataset_from_another_profile_is_marked_by_the_sizes_its_runs_recorded():
    assert observed_subsample(900, 300, n_train_full=18_297, n_test_full=4_614) == (900, 300)
    assert observed_subsample(1_760, 465, n_train_full=1_760, n_test_full=465) is None  # whole fold
    assert observed_subsample(500, 465, n_train_full=1_760, n_test_full=465) == (500, 0)  # training subsample only
