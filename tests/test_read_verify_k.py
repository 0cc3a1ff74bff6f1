"""bench/read_verify_k.py: readers see only uid, equation and problem; a problem shown at two K is read once; the
scores per K join the labels back through the key."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("read_verify_k", ROOT / "bench" / "read_verify_k.py")
read_verify_k = importlib.util.module_from_spec(spec)
spec.loader.exec_module(read_verify_k)


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
            shown.append({"k": k, "id": f"t{i}", "equation": "x = num1 + num2", "context": "c", "generated": text,
                          "verified": str(k == 8 and i % 2 == 0), "evaluator_parse": "x = num1 + num2",
                          "judged_by_evaluator": str(i == 0)})
    _csv(tmp_path / "verify_k_generations.csv", shown)
    read_verify_k.build(tmp_path)
    reading = tmp_path / "reading"
    problems = list(csv.DictReader(open(reading / "problems.csv")))
    assert list(problems[0]) == ["uid", "equation", "problem"] and len(problems) == 6  # 8 shown, 2 repeats
    right = {p["uid"]: int(p["problem"].startswith(("problem 0", "problem 2"))) for p in problems}
    _csv(reading / "labels_a.csv", [{"uid": u, "label": y} for u, y in right.items()])
    result = read_verify_k.score(tmp_path)
    assert result["per_k"][1]["read_right"] == 0.5 and result["per_k"][8]["read_right"] == 0.5
    assert result["per_k"][8]["verified"] == {"accepted": 2, "right": 2, "precision": 1.0}
    assert result["per_k"][1]["verified"]["precision"] is None  # nothing verified at K = 1 here
    assert result["per_k"][1]["judged_by_evaluator"] == {"accepted": 1, "right": 1, "precision": 1.0}
