"""End to end through DVC: keywords -> train (mwp2eq, GPT, GPT-pre, ours, seq2seq, the learned judge) ->
generate -> evaluate -> ablate (one Table 4 variant) -> tune (ours by DPO on the committed readings) -> report,
with a tiny randomly initialised model and tiny seq2seq models on tiny synthetic data (the judge on the committed
readings), in a scratch copy of the project."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
import yaml

from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from mwpgen.paths import FoldPaths
from tests.helpers.scratch_project import add_synthetic_readings, copy_project, run_in, scratch_env
from tests.helpers.synthetic_mwp import synthetic_records
from tests.helpers.tiny_model import tiny_model_dir

pytestmark = pytest.mark.slow  # end to end (pytest -m "not slow" skips it)


# One model per code path, to keep the suite short (each stage is a process of its own; they share one Prefect
# server): GPT differs from GPT-pre only in pretrained=False (tests/unit/test_lm.py), seq2seq-rnn from seq2seq-tf only
# inside mwpgen.seq2seq (tests/unit/test_seq2seq.py trains and decodes both), so neither is a stage here. Scoring is
# the same code for every model, so one generator is scored by `evaluate` (GPT-pre), one by `ablate`
# (ours-eq_softmax), and seq2seq-rnn + GloVe takes the not-run path.
GENERATED = ["gpt_pre", "seq2seq_rnn_glove", "seq2seq_tf", "ours"]
SCORED = ["gpt_pre", "seq2seq_rnn_glove"]
STAGES = ["keywords@arithmetic-0", "train_evaluator@arithmetic-0", "train_generator@gpt_pre-arithmetic-0",
          "train_ours@arithmetic-0", "train_judge@arithmetic-0",
          *(f"train_seq2seq@{m}-arithmetic-0" for m in ("seq2seq_rnn_glove", "seq2seq_tf")),
          *(f"generate@{m}-arithmetic-0" for m in GENERATED), *(f"evaluate@{m}-arithmetic-0" for m in SCORED),
          "measure_judge@arithmetic-0", "ablate@eq_softmax-arithmetic-0", "tune@dpo-arithmetic-0", "report"]


@pytest.fixture(scope="module")
def project(tmp_path_factory, prefect_api):
    dest = tmp_path_factory.mktemp("project")
    copy_project(dest)
    records = synthetic_records(id_prefix="syn")
    write_jsonl(dest / "data" / "processed" / "arithmetic.jsonl", records)
    write_json(dest / "data" / "splits" / "arithmetic.json",
               {"dataset": "arithmetic", "n_folds": 5, "seed": 1, "method": "seeded",
                "folds": seeded_folds(records, 5, 1)})
    add_synthetic_readings(dest, records, seeded_folds(records, 5, 1)[0])
    corpus = [r["text"] + " " + r["equation"] for r in records] + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE]
    tiny_model_dir(dest / "tiny-model", corpus)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    params["experiment"].update(datasets=["arithmetic"], folds=[0], max_train=0, max_test=0, validation_size=6)
    params["train"].update(model=str(dest / "tiny-model"), log_every=5)
    for kind in ("generator", "evaluator"):
        params["train"][kind].update(max_steps=40, batch_size=8, lr=3e-3, max_train=0)
    params["train"]["ours"].update(phase1={"epochs": 1, "max_steps": 4}, phase2={"epochs": 1, "max_steps": 3},
                                   max_train=0, lr=3e-3, save_every=2)
    params["train"]["seq2seq"].update(steps=40, emb_dim=16, rnn_hidden=32, rnn_layers=1, tf_d_model=32, tf_heads=2,
                                      tf_layers=1, tf_ff=64, tf_batch_tokens=512, tf_warmup_steps=10,
                                      glove_path=str(dest / "no-glove.txt"), num_beams=2, max_len=30)
    params["ablation"].update(variants=["eq_softmax"], datasets=["arithmetic"], folds=[0])
    params["generate"].update(max_new_tokens=24, batch_size=4)
    params["judge"].update(layer=1, finetune_layers=1)  # of the tiny model's 2, fine-tuned as by default
    params["tuning"].update(methods=["dpo"], max_steps=2, batch_size=4)
    params["serve"].update(model="ours-dpo")  # served where tuned: the tuned model this run makes
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = scratch_env(dest)
    # A parent run, as orchestration.pipeline would open, so the nesting pipeline -> model x dataset -> fold is checked.
    parent = run_in(
        dest,
        env,
        [
            "python",
            "-c",
            "from tracking.runs import client, experiment_id; c = client(); "
            "print(c.create_run(experiment_id(c), run_name='pipeline').info.run_id)",
        ],
    ).stdout.split()[-1]
    env["MWPGEN_PARENT_RUN_ID"] = parent
    proc = run_in(dest, env, ["dvc", "repro", "--single-item", *STAGES], timeout=1200)
    return dest, env, parent, proc.stdout


def test_every_model_stage_ran(project):
    output = project[3]
    for stage in STAGES:
        assert f"Running stage '{stage}'" in output


def test_generation_table_and_scores(project):
    dest = project[0]
    with open(dest / "results" / "generations" / "gpt_pre" / "arithmetic" / "fold0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == ["fold", "id", "equation", "context", "reference", "generated"]
    test_ids = json.loads((dest / "data" / "splits" / "arithmetic.json").read_text())["folds"][0]
    assert sorted(r["id"] for r in rows) == sorted(test_ids)
    scores = json.loads((dest / "results" / "scores" / "gpt_pre" / "arithmetic" / "fold0.json").read_text())
    for key in ("bleu4", "meteor", "rouge_l", "acc_eq", "novelty", "acc_eq_novel", "dist3"):
        assert key in scores
    oracle = json.loads((dest / "metrics" / "train" / "evaluator" / "arithmetic" / "fold0.json").read_text())
    assert 0.0 <= oracle["oracle_acc_eq"] <= 1.0 and oracle["n_test"] == len(test_ids)


def test_ours_selects_context_and_glove_row_is_not_run(project):
    dest = project[0]
    with open(dest / "results" / "generations" / "ours" / "arithmetic" / "fold0.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    split = json.loads((dest / "data" / "splits" / "arithmetic.json").read_text())
    assert sorted(r["id"] for r in rows) == sorted(split["folds"][0])  # one problem per test problem
    assert sum(bool(r["generated"].strip()) for r in rows) > len(rows) // 2  # a trained model writes text
    for r in rows:  # selected words come from the problem itself
        assert set(r["context"].split()) <= set(r["reference"].split())
    train = json.loads((dest / "metrics" / "train" / "ours" / "arithmetic" / "fold0.json").read_text())
    assert (train["phase1_steps"], train["phase2_steps"]) == (4, 3) and "phase2_eq" in train
    assert train["selector_warm_start"]["candidates"] > 0  # selector_init = keywords: fitted to TF-IDF picks
    assert "phase2_written_tokens" in train  # L_eq read problems the generator wrote (equation_text = free)
    assert not (dest / "checkpoints" / "ours" / "arithmetic" / "fold0" / "state.pt").exists()  # done: state dropped
    glove = json.loads((dest / "results" / "scores" / "seq2seq_rnn_glove" / "arithmetic" / "fold0.json").read_text())
    assert "no-glove.txt" in glove["not_run"] and "bleu4" not in glove
    for model in ("gpt_pre", "ours-eq_softmax"):
        scores = json.loads((dest / "results" / "scores" / model / "arithmetic" / "fold0.json").read_text())
        assert scores["n"] > 0 and "acc_eq" in scores, model


def test_every_trainer_reports_the_shared_names(project):
    """metrics/train and plots/train of every trainer by the same names (mwpgen/training_metrics.py), timings apart."""
    from mwpgen.training_metrics import SHARED

    dest = project[0]
    for model in ("evaluator", "gpt_pre", "seq2seq_tf", "ours", "ours-eq_softmax", "ours-dpo"):
        metrics = json.loads((dest / "metrics" / "train" / model / "arithmetic" / "fold0.json").read_text())
        assert list(metrics)[:len(SHARED)] == list(SHARED) and metrics["steps"] > 0, model
        timing = json.loads(FoldPaths(dest, model, "arithmetic", 0).train_timing.read_text())
        assert timing["wall_s"] >= 0 and "wall_s" not in metrics and "timing" not in metrics, model
        assert timing["machine"]["kind"] in ("AVX512-BF16", "AVX2-only", "other"), model
        curve = (dest / "plots" / "train" / model / "arithmetic" / "fold0.csv").read_text().splitlines()
        assert curve[0].startswith("step,train_loss,val_loss") and len(curve) >= metrics["steps"] + 1, model


def test_ours_tuned_on_readings_is_a_bundle_of_its_own_generated_and_scored(project):
    dest = project[0]
    metrics = json.loads((dest / "metrics" / "train" / "ours-dpo" / "arithmetic" / "fold0.json").read_text())
    assert metrics["method"] == "dpo" and metrics["steps"] == 2 and metrics["pairs"] > 0
    assert metrics["readings_not_training"] > 1000  # the corpus's real readings: not this split's training problems
    bundle = json.loads((dest / "models" / "ours-dpo" / "arithmetic" / "fold0" / "ours.json").read_text())
    assert bundle["tuned"]["method"] == "dpo" and bundle["context"] == "selector"
    scores = json.loads((dest / "results" / "scores" / "ours-dpo" / "arithmetic" / "fold0.json").read_text())
    assert scores["model"] == "ours-dpo" and 0.0 <= scores["acc_eq"] <= 1.0
    assert "ours + DPO on readings" in (dest / "reports" / "table2.md").read_text()  # its Table 2 row, Δ included


def test_report_tables_and_dvc_metrics(project):
    dest, env = project[0], project[1]
    table4 = (dest / "reports" / "table4.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| ").split(" [")[0] for line in table4.splitlines() if line.startswith("| ")}
    assert "L_eq (softmax)" in rows and "full model (paper: " in table4  # the variant that ran; the paper's full model
    assert "keyword, noun+pronoun" in rows  # answered by GPT-pre (same objective)
    assert "keyword, TF-IDF" not in rows  # not run: named in the note with the paper's figures
    assert "Not run here: " in table4 and "keyword, TF-IDF (paper: " in table4
    table5 = (dest / "reports" / "table5.md").read_text()
    ours_rows = list(csv.DictReader((dest / "results" / "generations" / "ours" / "arithmetic" / "fold0.csv")
                                    .read_text(encoding="utf-8").splitlines()))
    n_none = sum(not r["context"].split() for r in ours_rows)
    # the selection note counts the selector's real picks on this fold
    assert f"all {len(ours_rows)} test problems" in table5 and f"none for {n_none / len(ours_rows):.1%}" in table5
    for name in ("table2", "table3", "table4", "table5"):
        for ext in ("md", "csv", "tex"):
            assert (dest / "reports" / f"{name}.{ext}").stat().st_size > 0
    table2 = (dest / "reports" / "table2.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| ") for line in table2.splitlines() if line.startswith("| ")}
    assert {"GPT-pre (tiny-model, fine-tuned)", "mwp2eq on the reference problems (oracle)"} <= rows
    assert not [r for r in rows if r.startswith("ours (")]  # not scored in this test: no row, no made-up cells
    assert "ours + DPO on readings (tiny-model)" in rows  # tuned from it and scored (stage tune)
    assert "- ours (tiny-model): no scores yet" in table2 and "The paper reports BLEU-4 0.338" in table2
    assert "- seq2seq-rnn + GloVe (LSTM, GloVe embeddings): not run" in table2
    assert "0.316" in table2  # the paper's GPT-pre BLEU-4 on Arithmetic, shown for reference
    shown = run_in(dest, env, ["dvc", "metrics", "show", "metrics/report.json"]).stdout
    assert "gpt_pre.arithmetic.bleu4" in shown


def test_judge_measured_on_blind_labels_and_quoted_by_the_report(project):
    dest = project[0]
    measured = json.loads((dest / "metrics" / "judge" / "arithmetic" / "fold0.json").read_text())
    verdicts = [json.loads(line) for line in
                (dest / "results" / "judge" / "arithmetic" / "fold0.jsonl").read_text(encoding="utf-8").splitlines()]
    labels = {r["uid"]: int(r["label"]) for name in "abcd"
              for r in csv.DictReader((dest / "data" / "labels" / "judge" / f"labels_{name}.csv").read_text(
                  encoding="utf-8").splitlines())}
    assert measured["n"] == len(verdicts) == len(labels)  # max_test 0: every label
    assert all(v["label"] == labels[v["uid"]] for v in verdicts)  # the first reading, problem by problem
    test = [v for v in verdicts if v["part"] == "test"]
    assert measured["test"]["n"] == len(test) and measured["test"]["consistent"] == sum(v["label"] for v in test)
    assert measured["test"]["judge"]["accepted"] == sum(v["judged"] for v in test)
    assert all(v["acc_eq"] or not v["judged"] for v in verdicts)  # the judge accepts only what the parse matches
    report = json.loads((dest / "metrics" / "report.json").read_text())
    assert report["judge"]["test"]["judge"]["accepted"] == measured["test"]["judge"]["accepted"]
    assert f"Against {len(test)} blind readings" in (dest / "reports" / "table2.md").read_text()


def test_the_learned_judge_is_trained_and_adopted_only_where_it_beats_the_rule(project):
    dest = project[0]
    trained = json.loads((dest / "metrics" / "judge_train" / "arithmetic" / "fold0.json").read_text())
    assert trained["readings"]["train"]["n"] > 0 and trained["validation"]["n"] > 0
    versus = trained["against_rule"]  # the rule read with the tiny evaluator's parse, beside the learned judge
    assert trained["adopted"] is versus["adopted"] and "rule_precision" in versus and versus["reason"]
    folder = dest / "models" / "judge" / "arithmetic" / "fold0"
    assert (folder / "judge.json").exists() is trained["adopted"] is not (folder / "no_judge.json").exists()
    scores = json.loads((dest / "results" / "scores" / "gpt_pre" / "arithmetic" / "fold0.json").read_text())
    predictions = [json.loads(line) for line in (dest / "results" / "predictions" / "gpt_pre" / "arithmetic" /
                                                 "fold0.jsonl").read_text(encoding="utf-8").splitlines()]
    # consistency (judged) is the rule's on every fold; the learned judge's share is its own metric, where adopted
    assert scores["consistency_judged"] == sum(p["judged"] for p in predictions) / len(predictions)
    assert ("consistency_learned" in scores) is trained["adopted"]
    measured = json.loads((dest / "metrics" / "judge" / "arithmetic" / "fold0.json").read_text())
    table2 = " ".join((dest / "reports" / "table2.md").read_text().split())  # wrapped
    if trained["adopted"]:
        assert scores["consistency_learned"] == sum(p["learned_judged"] for p in predictions) / len(predictions)
        assert measured["learned_judge"]["n"] > measured["test"]["n"] and "auc" in measured["learned_judge"]["learned"]
        assert "consistency (learned): the share of problems the learned judge accepts" in table2
    else:
        assert "no_judge" in measured["learned_judge"] and "learned judge accepts" not in table2


def test_mlflow_nesting_pipeline_model_dataset_fold(project):
    dest, _, parent = project[:3]
    db = sqlite3.connect(dest / "mlflow.db")
    names = dict(db.execute("select run_uuid, name from runs").fetchall())
    parents = dict(db.execute("select run_uuid, value from tags where key = 'mlflow.parentRunId'").fetchall())
    groups = {names[r] for r, p in parents.items() if p == parent}
    assert {"gpt_pre · arithmetic", "evaluator · arithmetic", "ours · arithmetic"} <= groups
    group = next(r for r, p in parents.items() if p == parent and names[r] == "gpt_pre · arithmetic")
    folds = [r for r, p in parents.items() if p == group]
    assert [names[r] for r in folds] == ["gpt_pre · arithmetic · fold 0"]
    logged = {k for (k,) in db.execute("select key from metrics where run_uuid = ?", folds)}
    # train, generate, evaluate in one run; timings apart under time/
    assert {"train_loss", "bleu4", "acc_eq", "time/problems_per_s"} <= logged
    done = dict(db.execute("select key, value from tags where run_uuid = ? and key like 'mwpgen.stage.%'", folds))
    assert done == {f"mwpgen.stage.{s}": "done" for s in ("train", "generate", "evaluate")}


def test_second_repro_of_model_stages_is_a_noop(project):
    dest, env = project[0], project[1]
    proc = run_in(dest, env, ["dvc", "status", *STAGES])
    assert "changed" not in proc.stdout, proc.stdout
