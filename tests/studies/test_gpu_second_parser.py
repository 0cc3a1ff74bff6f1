"""studies/judge_choice/gpu_second_parser.py on a tiny model: the second parser trains on the other datasets' training
folds with every Arithmetic text removed, and writes the judge's features of every labelled problem and its Arithmetic
parse accuracy."""

from __future__ import annotations

import csv
import json
import sys

from mwpgen.data.splits import seeded_folds
from mwpgen.io import read_jsonl, write_json, write_jsonl
from studies.judge_choice import gpu_second_parser
from tests.helpers.tiny_project import tiny_arithmetic_project


def test_second_parser_features_without_arithmetic_texts(tmp_path, monkeypatch):
    params, data, _ = tiny_arithmetic_project(tmp_path)
    arithmetic = list(read_jsonl(data / "processed" / "arithmetic.jsonl"))
    for source in ("mawps", "math23k"):
        # Every third record is an Arithmetic text (case and spacing changed): the leakage key must drop it.
        records = [{**r, "id": str(i + 1), "dataset": source,
                    "text": r["text"].upper() + "  " if i % 3 == 0 else r["text"].replace("now", f"in {source}")}
                   for i, r in enumerate(arithmetic)]
        write_jsonl(data / "processed" / f"{source}.jsonl", records)
        write_json(data / "splits" / f"{source}.json", {"dataset": source, "folds": seeded_folds(records, 5, 1)})
    labels = tmp_path / "problems.csv"
    with labels.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["uid", "equation", "problem"])
        w.writerows(
            [["p1", "x = num1 + num2", arithmetic[0]["text"]], ["p2", "x = num1 - num2", arithmetic[1]["text"]]]
        )
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["bench", "--out", str(out), "--params", str(params), "--data", str(data),
                                      "--labels", str(labels), "--max-steps", "2", "--batch-size", "4",
                                      "--models", str(tmp_path / "models")])
    gpu_second_parser.main()
    summary = json.loads((out / "summary.json").read_text())
    for source in ("mawps", "math23k"):
        sizes = summary["sources"][source]
        assert 0 < sizes["train_kept"] < sizes["train"]  # the Arithmetic texts went, the others stayed
    assert summary["train"]["steps"] == 2
    assert summary["arithmetic_test"]["n"] > 0 and 0 <= summary["arithmetic_test"]["acc_eq"] <= 1
    feats = list(read_jsonl(out / "features.jsonl"))
    assert [f["uid"] for f in feats] == ["p1", "p2"] and all("margin" in f and "exact" in f for f in feats)
