"""The reading corpus tool (studies/reading/corpus.py): shapes, the weighted draw, a blind set that keeps its uids
when it grows, labels checked by line, and a draw with a tiny GPT-pre on synthetic training equations."""

from __future__ import annotations

import argparse
import collections
import csv

import pytest
import yaml

from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from studies.reading import corpus
from tests.helpers.synthetic_mwp import synthetic_records
from tests.helpers.tiny_model import tiny_model_dir


@pytest.mark.parametrize("equation, expected", [
    ("x = num1 + num2", "+"), ("x = num2 - num1", "-"), ("x = ( num1 / num2 )", "/"), ("x = - num1 * num2", "*"),
    ("x = num1 + num2 * num3", "two operators"), ("x = ( num1 - num2 ) / num3 + num4", "three or more operators")])
def test_shape_is_the_equations_binary_operators(equation, expected):
    assert corpus.shape(equation) == expected


def test_weighted_draw_is_seeded_distinct_and_favours_the_rare_shapes():
    records = [{"id": str(i), "equation": "x = num1 + num2" if i % 2 else "x = num1 - num2"} for i in range(2000)]
    drawn = corpus.weighted_draw(records, 400, "s")
    assert drawn == corpus.weighted_draw(records, 400, "s")
    assert len({r["id"] for r in drawn}) == 400
    shapes = collections.Counter(corpus.shape(r["equation"]) for r in drawn)
    assert shapes["-"] > 1.5 * shapes["+"]  # weight 2 against 1: about 2:1 in a draw this small a share


def _candidates(out, name, pairs):
    rows = [{"split": "train", "id": str(i), "equation": eq, "shape": corpus.shape(eq), "context": "c",
             "model": "ours", "source": "greedy", "sample": 0, "generated": text} for i, (eq, text) in enumerate(pairs)]
    corpus.blind_reading.write_rows(out / "candidates" / f"{name}.csv", rows, corpus.CANDIDATE_COLUMNS)


def _read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_build_keeps_uids_when_the_corpus_grows_and_covers_every_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "BATCH", 4)
    monkeypatch.setattr(corpus, "OVERLAP", 3)
    first = [("x = num1 + num2", f"problem {i}") for i in range(6)]
    _candidates(tmp_path, "ours_train", first + first[:2])  # a repeated text is one problem
    corpus.build(tmp_path)
    before = {p["uid"]: (p["equation"], p["problem"]) for p in _read(tmp_path / "problems.csv")}
    assert len(before) == 6
    overlap = _read(tmp_path / "batches" / "overlap.csv")
    _candidates(tmp_path, "gpt_pre_train", [("x = num1 - num2", f"other {i}") for i in range(3)])
    corpus.build(tmp_path)
    after = {p["uid"]: (p["equation"], p["problem"]) for p in _read(tmp_path / "problems.csv")}
    assert len(after) == 9 and all(after[u] == pair for u, pair in before.items())
    assert _read(tmp_path / "batches" / "overlap.csv") == overlap
    batched = [p["uid"] for b in sorted((tmp_path / "batches").glob("batch_*.csv")) for p in _read(b)]
    assert sorted(batched) == sorted(after)
    assert {r["uid"] for r in _read(tmp_path / "key.csv")} == set(after)


def test_score_names_a_bad_label_by_file_and_line_and_counts_agreement(tmp_path):
    _candidates(tmp_path, "ours_train", [("x = num1 + num2", "a"), ("x = num1 - num2", "b")])
    corpus.build(tmp_path)
    uids = [p["uid"] for p in _read(tmp_path / "problems.csv")]
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "batch_01.csv").write_text(f"uid,label,note\n{uids[0]},1,\n{uids[1]},yes,\n")
    with pytest.raises(SystemExit, match=r"batch_01.csv:3: label must be 0 or 1, got 'yes'"):
        corpus.score(tmp_path)
    (labels / "batch_01.csv").write_text(f"uid,label,note\n{uids[0]},1,\n{uids[1]},0,\n")
    (labels / "overlap.csv").write_text(f"uid,label,note\n{uids[0]},1,\n{uids[1]},1,\n")
    result = corpus.score(tmp_path)
    assert (result["read"], result["right"], result["overlap_read_twice"], result["overlap_agree"]) == (2, 1, 2, 1)
    assert sum(g["n"] for g in result["by"]["shape"].values()) == 2


def _project(tmp_path):
    """A synthetic Arithmetic fold (data folder, params file, folds) under tmp_path."""
    records = synthetic_records(40)
    data = tmp_path / "data"
    write_jsonl(data / "processed" / "arithmetic.jsonl", records)
    folds = seeded_folds(records, 5, 1)
    write_json(data / "splits" / "arithmetic.json", {"dataset": "arithmetic", "folds": folds})
    write_jsonl(data / "keywords" / "arithmetic" / "fold0.jsonl",
                [{"id": r["id"], "split": "test" if r["id"] in folds[0] else "train", "noun": ["apples"],
                  "tfidf": ["apples"]} for r in records])
    params = yaml.safe_load((corpus.ROOT / "params.yaml").read_text())
    params["experiment"]["validation_size"] = 4
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return records, data, folds


def test_shapes_keep_the_seeded_order_of_those_shapes(tmp_path):
    _, data, _ = _project(tmp_path)
    args = dict(params=tmp_path / "params.yaml", data=data, dataset="arithmetic", fold=0, split="train",
                seed=corpus.SEED, skip=0)
    every = corpus._records(argparse.Namespace(**args, n=10**6, shapes=None))
    wanted = ["-", "two operators"]
    picked = corpus._records(argparse.Namespace(**args, n=3, shapes=wanted))
    assert picked == [r for r in every if corpus.shape(r["equation"]) in wanted][:3] and len(picked) == 3
    later = corpus._records(argparse.Namespace(**(args | {"skip": 5}), n=10**6, shapes=wanted))
    assert later == [r for r in every[5:] if corpus.shape(r["equation"]) in wanted]


def test_draw_with_gpt_pre_writes_only_training_equations(tmp_path):
    records, data, folds = _project(tmp_path)
    model = tiny_model_dir(tmp_path / "tiny", [r["text"] + " " + r["equation"] for r in records]
                           + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE])
    common = ["--model", "gpt_pre", "--split", "train", "--k", "2", "--batch", "2", "--max-new-tokens", "6",
              "--data", str(data), "--params", str(tmp_path / "params.yaml"), "--device", "cpu",
              "--out", str(tmp_path / "corpus")]
    corpus.main(["draw", str(model), "--n", "5", *common])
    rows = _read(tmp_path / "corpus" / "candidates" / "gpt_pre_train.csv")
    assert rows and {r["split"] for r in rows} == {"train"}
    assert not {r["id"] for r in rows} & set(folds[0])  # no test equation
    assert len({r["id"] for r in rows}) <= 5 and {r["source"] for r in rows} <= {"greedy", "T=0.7", "T=1"}
    # A later draw continues the same seeded order in a file of its own: no equation twice, nothing overwritten.
    corpus.main(["draw", str(model), "--n", "4", "--skip", "5", *common])
    assert _read(tmp_path / "corpus" / "candidates" / "gpt_pre_train.csv") == rows
    more = _read(tmp_path / "corpus" / "candidates" / "gpt_pre_train_from5.csv")
    assert more and not {r["id"] for r in more} & {r["id"] for r in rows}
    # A draw in parts (other shapes, another --keep) writes each part's file: still nothing overwritten.
    corpus.main(["draw", str(model), "--n", "2", "--shapes", "+", "--part", "easy", *common])
    assert _read(tmp_path / "corpus" / "candidates" / "gpt_pre_train.csv") == rows
    easy = _read(tmp_path / "corpus" / "candidates" / "gpt_pre_train_easy.csv")
    assert easy and {corpus.shape(r["equation"]) for r in easy} == {"+"}
    with pytest.raises(SystemExit) as refused:
        corpus.main(["draw", str(model), "--part", "../x", *common])
    assert refused.value.code == 2


def test_ours_batched_greedy_texts_are_each_requests_own(tmp_path):
    from mwpgen.generate.request import Request
    from mwpgen.generate.service import Service
    from tests.unit.test_generate_cli import RECORDS, make_tiny_bundle

    service = Service.load(make_tiny_bundle(tmp_path / "ours"), device="cpu")
    requests = [Request(equation=e, context=k, given=e, decoding="greedy", max_new_tokens=8) for e, _, k in RECORDS]
    alone = [service.samples(r, service.prompt(r))[0] for r in requests]
    batched = corpus.ours_texts(service, [service.prompt(r) for r in requests], {"decoding": "greedy"}, 1, 0, 8)
    assert batched == alone
    sampled = corpus.ours_texts(service, [service.prompt(r) for r in requests],
                                {"decoding": "top_p", "temperature": 1.0, "top_p": 0.9}, 3, 0, 8)
    assert len(sampled) == 9


def test_a_judged_draw_keeps_what_the_served_model_shows_first(tmp_path, monkeypatch):
    """`draw --judge`: each equation's candidates are the first --keep problems `mwpgen generate --verify K` shows
    with that judge (the same requests answered again give the same texts), nothing the judge computed stored."""
    from mwpgen.generate.request import Request
    from studies.verify_k import verify_k
    from tests.helpers.tiny_bundle import make_tiny_bundle, make_tiny_judge

    bundle = make_tiny_bundle(tmp_path / "ours")
    judge = make_tiny_judge(tmp_path / "ours-base", tmp_path / "judge")
    service, _ = verify_k.load_service(bundle, judge, "cpu")
    monkeypatch.setattr(verify_k, "load_service", lambda *a: (service, object()))  # the tiny bundle has no selector
    monkeypatch.setattr(verify_k, "fold_contexts", lambda sel, settings, tok, records, *a: [("jar",)] * len(records))
    records = [{"id": "a", "equation": "x = num1 - num2"}, {"id": "b", "equation": "x = num1 * num2"}]
    args = argparse.Namespace(checkpoint=bundle, judge=judge, device="cpu", dataset="arithmetic", fold=0, keep=2,
                              verify=4, seed=7, skip=0, top_p=0.9, max_new_tokens=8, batch=1, split="train",
                              model="ours", name="ours-rft", out=tmp_path / "set")
    rows = corpus._draw_accepted(args, records)
    assert {r["source"] for r in rows} == {"judge top 2 of 4"} and set(corpus.CANDIDATE_COLUMNS) == set(rows[0])
    for i, record in enumerate(records):
        again = service.answer(Request(equation=record["equation"], context=("jar",), given=record["equation"], n=2,
                                       seed=7 + i, verify=4, decoding="top_p", top_p=0.9, temperature=1.0,
                                       max_new_tokens=8), i)
        assert [r["generated"] for r in rows if r["id"] == record["id"]] == [p.masked_text for p in again
                                                                              if p.masked_text]
    assert (tmp_path / "set" / "candidates" / "ours-rft_train.csv").exists()
    # A draw stopped after the first equation, resumed: the rest drawn with their own seeds, the same candidates.
    stopped = [r for r in rows if r["id"] == "a"]
    corpus.blind_reading.write_rows(corpus._candidates_file(args), stopped, corpus.CANDIDATE_COLUMNS)
    args.resume = True
    asked = []
    answer = service.answer
    monkeypatch.setattr(service, "answer", lambda request, i: asked.append(request.equation) or answer(request, i))
    resumed = corpus._draw_accepted(args, records)
    assert asked == ["x = num1 * num2"]  # only the equation the stopped draw had not reached
    assert [(r["id"], r["generated"]) for r in resumed] == [(r["id"], r["generated"]) for r in rows]


def test_resume_is_refused_for_a_batched_draw(tmp_path):
    with pytest.raises(SystemExit, match="--resume continues a --judge draw"):
        corpus.main(["draw", str(tmp_path), "--model", "gpt_pre", "--split", "train", "--resume"])
