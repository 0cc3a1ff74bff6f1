"""studies/verify_k/read_verify_k.py, studies/read_models/read_models.py and studies/verify_pools/verify_pools.py:
readers see only uid, equation and problem; a problem shown twice is read once; the scores join the labels back
through the key."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from studies.read_models import read_models
from studies.verify_k import read_verify_k
from studies.verify_pools import verify_pools


def _csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_build_hides_everything_but_the_text_and_score_joins_back(tmp_path):
    shown = []
    for k in (1, 8):
        for i in range(4):
            text = f"problem {i} same" if i < 2 else f"problem {i} at k {k}"  # problems 0, 1: shown at both K
            shown.append({"k": k, "id": f"t{i}", "equation": "x = num1 - num2" if i == 3 else "x = num1 + num2",
                          "context": "c", "generated": text,
                          "verified": str(k == 8 and i % 2 == 0), "evaluator_parse": "x = num1 + num2",
                          "judged_by_evaluator": str(i == 0)})
    _csv(tmp_path / "verify_k_generations.csv", shown)
    reading = tmp_path / "reading"
    read_verify_k.build(tmp_path, reading)
    problems = list(csv.DictReader((reading / "problems.csv").read_text(encoding="utf-8").splitlines()))
    assert list(problems[0]) == ["uid", "equation", "problem"] and len(problems) == 6  # 8 shown, 2 repeats
    right = {p["uid"]: int(p["problem"].startswith(("problem 0", "problem 2"))) for p in problems}
    _csv(reading / "labels_a.csv", [{"uid": u, "label": y} for u, y in right.items()])
    result = read_verify_k.score(reading)
    assert result["per_k"][1]["read_right"] == 0.5 and result["per_k"][8]["read_right"] == 0.5
    assert result["per_k"][8]["verified"] == {"accepted": 2, "right": 2, "precision": 1.0}
    assert result["per_k"][1]["verified"]["precision"] is None  # nothing verified at K = 1 here
    assert result["per_k"][1]["judged_by_evaluator"] == {"accepted": 1, "right": 1, "precision": 1.0}
    assert result["by_shape"] == {"+": {1: {"shown": 3, "right": 2}, 8: {"shown": 3, "right": 2}},
                                  "-": {1: {"shown": 1, "right": 0}, 8: {"shown": 1, "right": 0}}}

    # the same shown problems in two sets read apart (the first 3 rows, then the rest), scored together
    first, rest = tmp_path / "first", tmp_path / "rest"
    read_verify_k.build(tmp_path, rest, skip=3, prefix="s")
    read_verify_k.build(tmp_path, first, rows=3)
    for part in (first, rest):
        texts = list(csv.DictReader((part / "problems.csv").read_text(encoding="utf-8").splitlines()))
        _csv(part / "labels_a.csv", [{"uid": p["uid"], "label": int(p["problem"].startswith(("problem 0",
                                                                                              "problem 2")))}
                                     for p in texts])
    together = read_verify_k.score(first, rest, report=tmp_path / "together")
    assert together["per_k"] == result["per_k"] and together["by_shape"] == result["by_shape"]
    with pytest.raises(SystemExit, match="in another set too"):
        read_verify_k.score(reading, reading, report=tmp_path / "twice")


def test_a_label_that_is_not_0_or_1_is_named_by_file_and_line(tmp_path):
    from studies.reading import blind_reading

    _csv(tmp_path / "key.csv", [{"uid": "r0001"}, {"uid": "r0002"}])
    _csv(tmp_path / "labels_a.csv", [{"uid": "r0001", "label": "1"}, {"uid": "r0002", "label": "yes"}])
    with pytest.raises(SystemExit, match=r"labels_a\.csv:3: label must be 0 or 1, got 'yes'"):
        blind_reading.labels(tmp_path)


def _read_right(text: str) -> int:
    """The readers of these tests: ours always right, GPT-pre on the problems with an even number."""
    return int(text.startswith("ours") or int(text.split()[-1]) % 2 == 0)


def test_read_models_pairs_the_same_test_problems_and_checks_the_verdicts(tmp_path):
    import json

    for m in ("gpt_pre", "ours"):
        (tmp_path / "results" / "generations" / m / "arithmetic").mkdir(parents=True)
        (tmp_path / "results" / "predictions" / m / "arithmetic").mkdir(parents=True)
        _csv(tmp_path / "results" / "generations" / m / "arithmetic" / "fold0.csv",
             [{"id": f"t{i}", "equation": "x = num1 + num2", "generated": f"{m} writes {i}"} for i in range(30)])
        (tmp_path / "results" / "predictions" / m / "arithmetic" / "fold0.jsonl").write_text("".join(
            json.dumps({"id": f"t{i}", "judged": i % 3 == 0, "acc_eq": True}) + "\n" for i in range(30)))
    out = tmp_path / "reading"
    read_models.build(["gpt_pre", "ours"], 20, "arithmetic", 0, out, root=tmp_path)
    problems = list(csv.DictReader((out / "problems.csv").read_text(encoding="utf-8").splitlines()))
    assert len(problems) == 40 and list(problems[0]) == ["uid", "equation", "problem"]
    labels = [{"uid": p["uid"], "label": _read_right(p["problem"])} for p in problems]
    _csv(out / "labels_a.csv", labels)
    result = read_models.score([out], root=tmp_path)
    ours, base = result["models"]["ours"], result["models"]["gpt_pre"]
    assert ours["read_right"] == 1.0 and 0 < base["read_right"] < 1
    d = ours["minus_gpt_pre"]
    assert d["mean"] == 1.0 - base["read_right"] and d["low"] <= d["mean"] <= d["high"]
    assert ours["acc_eq"]["precision"] == 1.0 and ours["acc_eq"]["share"] == 1.0

    # the same models read in two sets of their own (the same draw) score as one
    for m in ("gpt_pre", "ours"):
        read_models.build([m], 20, "arithmetic", 0, tmp_path / m, root=tmp_path)
        rows = csv.DictReader((tmp_path / m / "problems.csv").read_text(encoding="utf-8").splitlines())
        texts = {p["uid"]: p["problem"] for p in rows}
        _csv(tmp_path / m / "labels_a.csv", [{"uid": u, "label": _read_right(t)} for u, t in texts.items()])
    apart = read_models.score([tmp_path / "gpt_pre", tmp_path / "ours"], root=tmp_path)
    assert apart["models"] == result["models"]
    # the later set's model against the earlier one, reported where asked
    beside = read_models.score([tmp_path / "ours", tmp_path / "gpt_pre"], root=tmp_path, report=tmp_path / "gpt_pre")
    assert beside["models"]["gpt_pre"]["minus_ours"]["mean"] == base["read_right"] - 1.0
    assert (tmp_path / "gpt_pre" / "reading.md").read_text().count("| gpt_pre |") == 1
    # or against a baseline named from a later set: the same intervals as when its set comes first
    named = read_models.score([tmp_path / "ours", tmp_path / "gpt_pre"], root=tmp_path, baseline="gpt_pre")
    assert named["models"] == result["models"]
    with pytest.raises(SystemExit, match="--baseline gpt: not among"):
        read_models.score([tmp_path / "ours"], root=tmp_path, baseline="gpt")


def test_the_claim_is_pooled_over_folds_each_fold_weighing_the_same(tmp_path):
    for fold, n in ((1, 30), (2, 12)):
        for m in ("gpt_pre", "ours"):
            folder = tmp_path / "results" / "generations" / m / "arithmetic"
            folder.mkdir(parents=True, exist_ok=True)
            _csv(folder / f"fold{fold}.csv", [{"id": f"f{fold}t{i}", "equation": "x = num1 + num2",
                                               "generated": f"{m} writes {i}"} for i in range(n)])
        out = tmp_path / "read_folds" / f"fold{fold}"
        read_models.build(["gpt_pre", "ours"], n, "arithmetic", fold, out, root=tmp_path)
        rows = list(csv.DictReader((out / "problems.csv").read_text(encoding="utf-8").splitlines()))
        _csv(out / "labels_a.csv", [{"uid": p["uid"], "label": _read_right(p["problem"])} for p in rows])
    result = read_models.pool([tmp_path / "read_folds" / "fold1", tmp_path / "read_folds" / "fold2"],
                              tmp_path / "pooled")
    one, two = result["folds"]
    assert (one["fold"], one["test_problems"], two["fold"], two["test_problems"]) == (1, 30, 2, 12)
    assert one["ours"] == two["ours"] == 1.0 and one["gpt_pre"] == 0.5 and two["gpt_pre"] == 0.5  # even numbers
    pooled = result["pooled"]
    assert pooled["difference"] == pytest.approx((one["difference"] + two["difference"]) / 2)
    assert pooled["low"] <= pooled["difference"] <= pooled["high"] and pooled["test_problems"] == 42
    assert "| pooled (2 folds) | 42 | 50 % | 100 % | **+50 [" in (tmp_path / "pooled" / "reading.md").read_text()
    # a fold's own interval is `score`'s: it does not hang on which folds are pooled beside it, or in what order
    alone = read_models.pool([tmp_path / "read_folds" / "fold2"], tmp_path / "alone")["folds"][0]
    swapped = read_models.pool([tmp_path / "read_folds" / "fold2", tmp_path / "read_folds" / "fold1"],
                               tmp_path / "swapped")
    assert (alone["low"], alone["high"]) == (two["low"], two["high"]) == (swapped["folds"][0]["low"],
                                                                         swapped["folds"][0]["high"])
    assert alone["low"] < alone["high"]
    with pytest.raises(SystemExit, match=r"no generated problems of gpt \(results/generations/gpt/arithmetic/"
                       r"fold1.csv\): run arithmetic fold 1's generate stages first"):
        read_models.build(["gpt_pre", "gpt"], 10, "arithmetic", 1, tmp_path / "not_yet", root=tmp_path)
    assert not (tmp_path / "not_yet").exists()
    with pytest.raises(SystemExit, match="fold1: no problems of gpt in this fold's sets"):
        read_models.pool([tmp_path / "read_folds" / "fold1"], tmp_path / "again", model="ours", baseline="gpt")

    # a fold whose models were read in sets of their own (the same draw) is one fold, paired as if read together
    for m in ("gpt_pre", "ours"):
        out = tmp_path / "apart" / m
        read_models.build([m], 30, "arithmetic", 1, out, root=tmp_path)
        rows = list(csv.DictReader((out / "problems.csv").read_text(encoding="utf-8").splitlines()))
        _csv(out / "labels_a.csv", [{"uid": p["uid"], "label": _read_right(p["problem"])} for p in rows])
    apart = read_models.pool([tmp_path / "apart" / "gpt_pre", tmp_path / "read_folds" / "fold2",
                              tmp_path / "apart" / "ours"], tmp_path / "pooled_apart")
    assert [f["fold"] for f in apart["folds"]] == [1, 2] and len(apart["folds"][0]["sets"]) == 2
    assert apart["pooled"] == pooled
    with pytest.raises(SystemExit, match="ours was read in another set of this fold too"):
        read_models.pool([tmp_path / "read_folds" / "fold1", tmp_path / "apart" / "ours"], tmp_path / "twice")
    read_models.build(["ours"], 12, "arithmetic", 1, tmp_path / "fewer", root=tmp_path)
    with pytest.raises(SystemExit, match="read different test problems"):
        read_models.pool([tmp_path / "read_folds" / "fold1", tmp_path / "fewer"], tmp_path / "unpaired")


def test_a_pooled_bound_a_rounding_error_below_zero_reads_plus_zero():
    assert [read_models.points(x) for x in (-9.25e-18, 0.12, -0.05, 0.1166)] == ["+0", "+12", "-5", "+12"]


def test_pool_rankings_show_what_each_puts_first():
    def cand(sample, read, co, evaluator, firmness):
        return {"sample": str(sample), "read": read, "co_verified": str(co), "evaluator_judged": str(evaluator),
                "co_firmness": str(firmness), "generator_loglik": str(-sample)}

    pools = {  # pool a: the right one is third and only the evaluator accepts it; pool b: nothing right
        "a": [cand(0, 0, True, False, -0.1), cand(1, 0, False, False, -0.5), cand(2, 1, True, True, -0.3)],
        "b": [cand(0, 0, False, False, -1.0), cand(1, 0, True, False, -0.2)]}
    result = verify_pools.score_pools(pools, [1, 3])
    assert result["candidates"] == 5 and result["candidates_right"] == 0.2
    one, three = result["per_k"][1], result["per_k"][3]
    assert one["pool_holds_right"] == 0.0 and three["pool_holds_right"] == 0.5
    ranked = three["rankings"]
    assert ranked["first candidate (no verification)"]["shown_right"] == 0.0
    service = ranked["service: co-trained verdict, then firmness"]  # a: sample 0 (firmer); b: sample 1
    assert service["shown_right"] == 0.0 and (service["verified"], service["verified_right"]) == (2, 0)
    both = ranked["both parsers' verdicts, then firmness"]
    assert both["shown_right"] == 0.5 and (both["verified"], both["verified_precision"]) == (1, 1.0)


def test_a_greedy_pool_counts_the_greedy_problem_as_its_first_candidate():
    key = [{"uid": "u1", "split": "test", "source": "greedy", "id": "a", "sample": "0"},
           {"uid": "u2", "split": "test", "source": "T=1", "id": "a", "sample": "0"},
           {"uid": "u1", "split": "test", "source": "T=1", "id": "a", "sample": "1"},  # the greedy text sampled again
           {"uid": "u3", "split": "test", "source": "T=1", "id": "a", "sample": "2"}]
    kinds = verify_pools.candidate_pools(key, {"u1": 1, "u2": 0, "u3": 0}, "test")
    assert set(kinds) == {"T=1", "greedy + T=1"}
    pool = kinds["greedy + T=1"]["a"]
    assert [(c["uid"], c["sample"]) for c in pool] == [("u1", "0"), ("u2", "1"), ("u3", "3")]


def test_a_fresh_reader_is_compared_with_each_sets_first_reading(tmp_path):
    for name in ("a", "b"):
        s = tmp_path / name
        s.mkdir()
        problems = [{"uid": f"m{i:04d}", "equation": "x = num1 + num2", "problem": f"{name} {i}"} for i in range(12)]
        _csv(s / "problems.csv", problems)
        _csv(s / "key.csv", [{"uid": p["uid"], "model": name, "id": str(i)} for i, p in enumerate(problems)])
        _csv(s / "overlap.csv", [{"uid": "m0000"}, {"uid": "m0001"}])
        _csv(s / "labels_a.csv", [{"uid": p["uid"], "label": int(p["problem"].endswith(("0", "2", "4")))}
                                  for p in problems])
    cross = tmp_path / "cross"
    read_models.cross_build([tmp_path / "a", tmp_path / "b"], 5, cross)
    shown = list(csv.DictReader((cross / "problems.csv").read_text(encoding="utf-8").splitlines()))
    assert len(shown) == 10 and list(shown[0]) == ["uid", "equation", "problem"]  # the reader sees no set
    assert not {"a 0", "a 1", "b 0", "b 1"} & {p["problem"] for p in shown}  # no overlap problem
    # the fresh reader agrees with set a's first reading everywhere, and calls every problem of b wrong
    key = {r["uid"]: r for r in csv.DictReader((cross / "key.csv").read_text(encoding="utf-8").splitlines())}
    _csv(cross / "labels_fresh.csv", [{"uid": p["uid"], "label": int(key[p["uid"]]["set"] == "a" and
                                                                      p["problem"].endswith(("0", "2", "4")))}
                                      for p in shown])
    result = read_models.cross_score([tmp_path / "a", tmp_path / "b"], cross)
    a, b = result["sets"]["a"], result["sets"]["b"]
    assert a["read"] == 5 and a["agree"] == 5
    assert b["fresh_right"] == 0 and b["agree"] == 5 - b["first_right"]


def test_no_study_rebuilds_a_set_that_has_been_read(tmp_path, monkeypatch):
    """A new build renumbers a set's problems: over labels_*.csv it would leave labels describing texts nobody read.
    Every study that writes a blind set into data/labels/ refuses, naming the folder and its label files."""
    from studies.evaluator_agreement import evaluator_agreement
    from studies.reading import judge_labels

    shown = [{"k": 1, "id": "t0", "equation": "x = num1 + num2", "context": "c", "generated": "a problem",
              "verified": "True", "evaluator_parse": "x", "judged_by_evaluator": "False"}]
    _csv(tmp_path / "verify_k_generations.csv", shown)
    reading = tmp_path / "reading"
    read_verify_k.build(tmp_path, reading)  # a fresh folder, or one without labels, is built
    read_verify_k.build(tmp_path, reading)
    (reading / "labels_a.csv").write_text("uid,label\nr0001,1\n", encoding="utf-8")
    before = {p.name: p.read_text(encoding="utf-8") for p in reading.iterdir()}
    for build in (lambda: read_verify_k.build(tmp_path, reading),
                  lambda: verify_pools.build(tmp_path, reading),
                  lambda: read_models.build(["ours"], 1, "arithmetic", 0, reading, root=tmp_path),
                  lambda: read_models.cross_build([], 1, reading)):
        with pytest.raises(SystemExit, match=rf"^error: {reading} already holds readings \(labels_a.csv\)"):
            build()
    assert {p.name: p.read_text(encoding="utf-8") for p in reading.iterdir()} == before  # nothing rewritten
    monkeypatch.setattr(judge_labels, "OUT", reading)
    monkeypatch.setattr(judge_labels, "pool", lambda: pytest.fail("the pool was drawn over a read set"))
    with pytest.raises(SystemExit, match="already holds readings"):
        judge_labels.build()
    labelled = tmp_path / "labels.csv"
    labelled.write_text("model,id,equation,generated,label\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"error: {labelled} already exists"):
        evaluator_agreement.sample(labelled, 1, 0, "arithmetic", 0)


def test_the_studies_load_the_served_model_as_generate_does(tmp_path):
    """studies/verify_k and studies/surface_constraint answer requests with the Service `mwpgen generate` builds."""
    from mwpgen.generate.request import Request
    from studies.verify_k.verify_k import load_service
    from tests.helpers.tiny_bundle import make_tiny_bundle, make_tiny_judge

    bundle = make_tiny_bundle(tmp_path / "ours")
    judge = make_tiny_judge(tmp_path / "ours-base", tmp_path / "judge")
    service, _ = load_service(bundle, judge, "cpu")
    assert service.judge is not None and service.mwp2eq is not None  # the tiny bundle has no selector
    request = Request(equation="x = num1 - num2", context=("jar",), given="x = num1 - num2", n=1, seed=1, verify=2,
                      max_new_tokens=8)
    (problem,) = service.answer(request)
    assert problem.judge_probability is not None and problem.verified in (True, False)
    assert load_service(bundle, None, "cpu")[0].judge is None
