"""Stage train_judge (flows/train_judge.py) on tiny readings and a tiny evaluator: the judge is fitted on the train
part and its threshold chosen on the validation part, adopted only where it judges validation better than the rule,
saved with its figures, logged to the fold's MLflow run; a fold without readings, or a judge that does not beat the
rule, keeps the rule; too few readings of a class is one error naming the set. The flow's body runs here without
Prefect (its tasks as plain functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from prefect.logging import disable_run_logger

import flows.train_judge as stage
import tasks.train_judge as task
from mwpgen.config.schema import validate_params
from mwpgen.io import write_json
from mwpgen.judge import choose
from mwpgen.judge.model import PROMPT, LearnedJudge
from mwpgen.judge.saved import has_judge
from mwpgen.paths import FoldPaths
from tests.helpers.tiny_model import tiny_model_dir
from tests.helpers.tiny_readings import EQUATION, problem, write_reading_sets


@pytest.fixture()
def parsed(monkeypatch) -> list[Path]:
    """The rule's parse (the tiny evaluator's is noise): the equation itself. With it the real rule reads the tiny
    problems perfectly (only the right ones say "more"); `weak_rule` stands for a rule a judge can beat. Returns the
    folders the rule's parse was asked to read with."""
    folders = []
    monkeypatch.setattr(stage, "predict_equations", lambda params, folder, texts: folders.append(folder) or
                        [EQUATION] * len(texts))
    return folders


@pytest.fixture()
def project(tmp_path, monkeypatch, parsed):
    texts = write_reading_sets(tmp_path)
    write_json(tmp_path / "data" / "splits" / "arithmetic.json", {"folds": [["a-test-problem"], [], [], [], []]})
    tiny_model_dir(FoldPaths(tmp_path, None, "arithmetic", 0).evaluator.model_dir, texts + [PROMPT, EQUATION],
                   layers=2)
    monkeypatch.setattr(stage, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(stage, "fold_paths", lambda model, dataset, fold: FoldPaths(tmp_path, model, dataset, fold))
    monkeypatch.setattr(stage, "train_judge_model", stage.train_judge_model.fn)  # no Prefect task run
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return tmp_path


@pytest.fixture()
def weak_rule(monkeypatch):
    """A rule that accepts every problem (precision 0.5 on the tiny readings, recall 1): what a judge that ranks
    the validation readings right beats."""
    monkeypatch.setattr(stage, "judged", lambda parse, equation, problem: True)


def _run(judge: dict, dataset: str = "arithmetic") -> dict:
    judge = {"finetune_layers": 0, **judge}  # a probe (an exact, seedless fit) unless a test fine-tunes
    params = validate_params({"train": {"device": "cpu", "mixed_precision": False}, "judge": judge})
    with disable_run_logger():
        return stage.train_judge.fn(params, dataset, 0)


def test_the_judge_is_fitted_on_train_chosen_on_validation_saved_and_logged(project, parsed, weak_rule, monkeypatch):
    import tasks.train_judge

    monkeypatch.setattr(tasks.train_judge, "MIN_ACCEPTED", 4)  # of the tiny set's 16 validation readings
    result = _run({"layer": 2, "l2": 0.1})
    paths = FoldPaths(project, None, "arithmetic", 0)
    assert json.loads(paths.judge_metrics.read_text()) == result
    assert result["readings"] == {"train": {"n": 24, "right": 12, "problems": 12},  # the three corpora
                                  "validation": {"n": 16, "right": 8, "problems": 8}}  # judge + verify_pools
    val = result["validation"]
    assert val["n"] == 16 and val["auc"] == 1.0 and val["recall"] >= 0.5 and result["wall_s"] >= 0  # separable
    versus = result["against_rule"]  # the rule is read with the fold's evaluator, whatever the judge's backbone
    assert parsed == [paths.evaluator.model_dir] and result["adopted"] is versus["adopted"] is True
    assert (versus["rule_precision"], versus["rule_recall"], versus["learned_precision"]) == (0.5, 1.0, 1.0)
    assert versus["learned_accepted"] == val["accepted"]  # the saved threshold gives the verdicts it was chosen for
    # a rule that accepts everything gates nothing: the two forms tie and the judge stands alone
    assert result["gated_by_rule"] is False and result["forms"]["gated_by_rule"]["precision"] == 1.0
    assert "replaces the rule" in versus["reason"] and result["label_conflicts"] == []
    assert result["backbone"] == "models/evaluator/arithmetic/fold0 (the fold's evaluator)"
    judge = LearnedJudge.load(paths.judge)
    assert judge.info.threshold == pytest.approx(val["threshold"], abs=1e-6) and judge.info.layer == 2
    assert judge.info.measured["validation"] == val and judge.info.backbone == result["backbone"]
    assert judge.info.gated_by_rule is False
    # "verified: yes" held to 0.9 precision on validation: every reading is of one shape, which separable readings
    # reach with all 8 right ones; no reading has another shape, so no other shape is ever verified
    verified = result["verified"]
    assert judge.info.verified == verified and verified["precision_target"] == 0.9
    assert verified["validation"] == {"+": {"n": 16, "right": 8, "accepted": 8, "tp": 8, "precision": 1.0}}
    assert verified["thresholds"]["+"] is not None and set(verified["thresholds"].values()) - {None} == \
        {verified["thresholds"]["+"]}
    p = judge.probabilities([problem(True, "apples", 1), problem(False, "apples", 1)], [EQUATION] * 2)
    assert [judge.accepts(q) for q in p] == [q >= val["threshold"] for q in p]
    from tracking.runs import client, experiment_id

    c = client()
    (run,) = c.search_runs([experiment_id(c)], "tags.`mwpgen.key` = 'judge/arithmetic/fold0'")
    assert run.data.metrics["validation_auc"] == pytest.approx(val["auc"])
    assert run.data.metrics["rule_validation_precision"] == 0.5 and run.data.metrics["adopted"] == 1.0
    assert run.data.metrics["verified_validation_precision"] == 1.0
    assert run.data.params["judge.layer"] == "2" and run.data.tags["mwpgen.stage.train_judge"] == "done"


def test_a_judge_that_does_not_beat_the_rule_on_validation_is_not_adopted(project):
    result = _run({"layer": 2, "l2": 0.1})  # the real rule, which reads the tiny validation readings perfectly
    folder = FoldPaths(project, None, "arithmetic", 0).judge
    versus = result["against_rule"]
    assert result["adopted"] is False and (versus["rule_precision"], versus["rule_recall"]) == (1.0, 1.0)
    assert versus["learned_precision"] == 1.0  # a tie: the rule stays
    assert not has_judge(folder) and result["validation"]["auc"] == 1.0  # both figures are in the metrics
    saved = json.loads((folder / "no_judge.json").read_text())
    assert saved["reason"] == versus["reason"] and "not more precise, so the rule stays" in saved["reason"]
    assert saved["figures"] == {"validation": result["validation"], "against_rule": versus}
    with pytest.raises(FileNotFoundError, match="not more precise, so the rule stays"):
        LearnedJudge.load(folder)


def test_the_fitted_head_never_sees_validation_or_test_labels(project, monkeypatch):
    """Validation labels choose the threshold (and a seed); the head is fitted on train readings only, and test
    readings are never read: flipping both leaves the head as it was."""
    heads = []
    fit = task.fit_and_choose

    def keep_head(*args, **kwargs):
        judge, measured, p = fit(*args, **kwargs)
        heads.append({k: v.clone() for k, v in judge.state_dict().items() if not k.startswith("backbone.")})
        return judge, measured, p

    monkeypatch.setattr(task, "fit_and_choose", keep_head)
    first = _run({"layer": 2, "l2": 0.1})
    write_reading_sets(project, flipped=("validation", "test"))
    second = _run({"layer": 2, "l2": 0.1})
    assert first["validation"]["auc"] == 1.0 and second["validation"]["auc"] == 0.0  # the flip was read
    assert heads[0].keys() == heads[1].keys() == {"head.weight", "head.bias", "mean", "std"}
    assert all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])


def test_fine_tuning_trains_one_judge_per_seed_and_keeps_the_best_on_validation(project, weak_rule):
    result = _run({"layer": 2, "finetune_layers": 1, "epochs": 1, "batch_size": 4, "seeds": [3, 4], "lr": 1e-3})
    assert set(result["seed_auc"]) == {"3", "4"}
    assert result["seed"] in (3, 4) and result["seed_auc"][str(result["seed"])] == max(result["seed_auc"].values())
    assert LearnedJudge.load(FoldPaths(project, None, "arithmetic", 0).judge).info.trained_layers == 1


def test_a_judge_is_not_built_on_readings_of_the_folds_test_problems(project):
    """5-fold cross-validation: readings written for a fold's test problems (here every train-part group is made a
    test problem) may neither fit nor choose the judge scored on that fold."""
    from mwpgen.judge.readings import CHOOSING_SETS, readings

    groups = sorted({r["group"] for r in readings(project, CHOOSING_SETS)["train"]})
    write_json(project / "data" / "splits" / "arithmetic.json", {"folds": [groups, [], [], [], []]})
    with pytest.raises(ValueError, match=r"train_judge: \d+ of its readings' problems are test problems of "
                                         r"arithmetic fold 0"):
        _run({})
    assert not (project / "models" / "judge" / "arithmetic" / "fold0" / "judge.json").exists()


def test_a_fold_without_readings_gets_no_judge_and_says_why(project):
    result = _run({"layer": 1}, dataset="mawps")
    folder = FoldPaths(project, None, "mawps", 0).judge
    assert result["n"] == 0 and "arithmetic fold 0" in result["no_labels"] and not has_judge(folder)
    with pytest.raises(FileNotFoundError, match="arithmetic fold 0"):
        LearnedJudge.load(folder)


def test_too_few_readings_of_a_class_or_a_missing_corpus_is_named(project):
    write_reading_sets(project, right_in_train=0)
    with pytest.raises(
        ValueError,
        match=r"data/labels/corpus, data/labels/corpus_round2, data/labels/corpus_round3: the "
        r"train readings hold 0 read right and 24 read wrong",
    ):
        _run({"layer": 1})
    (project / "data" / "labels" / "corpus" / "problems.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"corpus/problems.csv: no such file"):
        _run({"layer": 1})


def test_a_subsample_keeps_both_classes_in_proportion():
    rows = [{"label": int(i < 10)} | {"i": i} for i in range(100)]
    kept = choose.subsample(rows, 20, seed=1)
    assert len(kept) == 20 and sum(r["label"] for r in kept) == choose.MIN_PER_CLASS
    assert kept == sorted(kept, key=lambda r: r["i"]) and choose.subsample(rows, 20, seed=1) == kept
    assert choose.subsample(rows, 0, seed=1) == rows


def test_the_learned_judge_must_be_more_precise_than_the_rule_at_its_threshold():
    p, labels = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 0, 1, 1, 0, 0]
    rule = [True, False, True, False, True, False]  # precision 2/3 at recall 2/3
    versus = choose.against_the_rule(p, 0.7, rule, labels)
    # p >= 0.7 accepts 0.9, 0.8, 0.7: 2 of the 3 right ones, precision 2/3, a tie
    assert versus["rule_precision"] == versus["learned_precision"] == pytest.approx(0.6667, abs=1e-4)
    assert versus["adopted"] is False and versus["learned_accepted"] == 3  # not above the rule
    adopted = choose.against_the_rule(p, 0.9, rule, labels)  # precision 1 at recall 1/3: the trade recall sets
    assert adopted["adopted"] is True and adopted["learned_recall"] == pytest.approx(0.3333, abs=1e-4)
    none = choose.against_the_rule(p, 0.5, [False] * 6, labels)
    assert none["adopted"] is False and "nothing to compare" in none["reason"] and none["rule_precision"] is None
    nothing = choose.against_the_rule(p, 1.0, rule, labels)  # accepts nothing: no precision, not adopted
    assert nothing["learned_precision"] is None and nothing["adopted"] is False
    with pytest.raises(ValueError, match="one of each per validation reading"):
        choose.against_the_rule(p, 0.5, rule[:2], labels)


def test_the_judge_is_gated_by_the_rule_where_that_is_more_precise_on_validation():
    labels = [1, 1, 1, 1, 0, 0, 0, 0]
    p = [0.9, 0.3, 0.8, 0.2, 0.95, 0.85, 0.1, 0.05]  # alone: the two wrong ones at 0.95 and 0.85 come first
    rule = [True, True, True, True, False, False, True, True]  # rejects exactly those two
    forms = choose.choose_form(p, rule, labels, recall=0.5)
    assert forms["alone"]["precision"] == 0.5 and forms["with_rule"]["precision"] == 1.0
    assert forms["gated_by_rule"] is True and forms["with_rule"]["threshold"] == forms["thresholds"]["with_rule"] == 0.8
    # the threshold a judge keeps is the score itself, not the figures' rounding of it (which would drop that reading)
    fine = choose.choose_form([0.1234567, 0.2, 0.9, 0.1], [True] * 4, [1, 0, 1, 0], recall=1.0)
    assert fine["thresholds"]["alone"] == 0.1234567 and fine["alone"]["threshold"] == 0.123457
    assert choose.choose_form(p, [True] * 8, labels, 0.5)["gated_by_rule"] is False  # a tie: alone
    # a rule whose recall is below the target: the gated form is the rule itself, never what it rejects
    low = choose.choose_form(p, [True] + [False] * 7, labels, 0.5)
    assert low["with_rule"]["threshold"] == choose.MIN_GATED_THRESHOLD and low["with_rule"]["accepted"] == 1


def test_measure_judge_measures_the_trained_judge_on_every_test_reading_beside_the_rule(project, monkeypatch,
                                                                                        weak_rule):
    import flows.measure_judge as measuring

    _run({"layer": 2, "l2": 0.1})
    monkeypatch.setattr(measuring, "PROJECT_ROOT", project)
    monkeypatch.setattr(measuring, "fold_paths", lambda model, d, k: FoldPaths(project, model, d, k))
    monkeypatch.setattr(measuring, "judge_probabilities", measuring.judge_probabilities.fn)
    # the evaluator's parse (tested with the rule elsewhere): the equation for the right problems, else another
    monkeypatch.setattr(measuring, "predict_equations",
                        lambda params, folder, texts: [EQUATION if "gets" in t else "x = num1 - num2" for t in texts])
    resampled = []  # what each interval resamples: dataset problems (groups), never single readings
    quality = measuring.verdict_quality
    monkeypatch.setattr(measuring, "verdict_quality", lambda verdicts, labels, seed, groups=None: resampled.append(
        groups) or quality(verdicts, labels, seed, groups=groups))
    params = validate_params({"train": {"device": "cpu"}})
    with disable_run_logger():
        result = measuring.measure_judge.fn(params, "arithmetic", 0)
    assert resampled and all(g is not None and len(set(g)) < len(g) for g in resampled)  # 2 readings a problem
    on = result["learned_judge"]
    # the tiny sets' test readings: judge and verify_pools 8 each, six read_models sets and verify_judge 8 each
    assert (on["n"], on["consistent"]) == (72, 36) and len(on["labels"]) == 9
    assert on["rule"]["precision"] == on["rule"]["recall"] == 1.0 and on["rule"]["auc"] == 1.0
    threshold = LearnedJudge.load(FoldPaths(project, None, "arithmetic", 0).judge).info.threshold
    assert on["learned"]["threshold"] == pytest.approx(threshold, abs=1e-6) and 0 <= on["learned"]["auc"] <= 1
    assert on["learned"]["accepted"] == on["learned"]["tp"] + on["learned"]["fp"]
    # "verified: yes" as the product says it, overall and per shape (the tiny readings: one shape)
    assert on["verified"]["precision_target"] == 0.9 and set(on["verified"]["shapes"]) == {"+"}
    assert on["verified"]["all"]["n"] == 72 and on["verified"]["shapes"]["+"]["n"] == 72
    assert set(result["test"]) == {"n", "consistent", "judge", "acc_eq", "learned"}
    assert result["validation"]["n"] == result["test"]["n"] == 8 and "dev" not in result  # one vocabulary
    assert on["label_conflicts"] == []
    verdicts = project / "results" / "judge" / "arithmetic" / "fold0.jsonl"
    rows = [json.loads(line) for line in verdicts.read_text(encoding="utf-8").splitlines()]
    # each verdict is the judge's on its unrounded p (the file keeps p to 4 places), read again here
    from mwpgen.judge.readings import read_csv

    shown = {r["uid"]: r for r in read_csv(project / "data" / "labels" / "judge" / "problems.csv")}
    judge = LearnedJudge.load(FoldPaths(project, None, "arithmetic", 0).judge)
    p = judge.probabilities([shown[r["uid"]]["problem"] for r in rows], [shown[r["uid"]]["equation"] for r in rows])
    assert len(rows) == 16 and [r["learned_judged"] for r in rows] == [q >= threshold for q in p]
    assert [r["part"] for r in rows] == ["validation"] * 8 + ["test"] * 8


def test_measure_judge_gives_a_gated_judge_the_rules_verdicts(project, monkeypatch, weak_rule):
    """A judge gated by the rule accepts in measure_judge only what the rule accepts, and is ranked on its gated
    scores: the rule rejects every problem here, so it accepts none, whatever its p."""
    import flows.measure_judge as measuring

    _run({"layer": 2, "l2": 0.1})
    folder = FoldPaths(project, None, "arithmetic", 0).judge
    info = json.loads((folder / "judge.json").read_text())
    (folder / "judge.json").write_text(json.dumps(info | {"gated_by_rule": True, "threshold": 1e-6}))
    monkeypatch.setattr(measuring, "PROJECT_ROOT", project)
    monkeypatch.setattr(measuring, "fold_paths", lambda model, d, k: FoldPaths(project, model, d, k))
    monkeypatch.setattr(measuring, "judge_probabilities", measuring.judge_probabilities.fn)
    monkeypatch.setattr(measuring, "predict_equations", lambda params, folder, texts: ["x = num1"] * len(texts))
    params = validate_params({"train": {"device": "cpu"}})
    with disable_run_logger():
        result = measuring.measure_judge.fn(params, "arithmetic", 0)
    on = result["learned_judge"]
    assert "gated by the rule" in on["judge"] and on["rule"]["accepted"] == 0
    assert on["learned"]["accepted"] == 0 and on["learned"]["auc"] == 0.5  # every gated score is 0: all tied
    rows = [json.loads(line) for line in (project / "results/judge/arithmetic/fold0.jsonl").read_text().splitlines()]
    assert rows and not any(r["learned_judged"] for r in rows) and not any(r["judged"] for r in rows)
