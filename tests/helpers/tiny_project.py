"""A scratch Arithmetic fold on disk for tests that run mwpgen without the pipeline: 60 synthetic problems (no two
texts alike), their seeded folds, fold 0's keywords, a tiny model, and params.yaml with the smoke profile and the
tiny model applied."""

from __future__ import annotations

import shutil
from pathlib import Path

from mwpgen.config.profiles import apply_profile
from mwpgen.data.splits import seeded_folds
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE
from tests.helpers.scratch_project import ROOT
from tests.helpers.tiny_model import tiny_model_dir


def tiny_arithmetic_project(root: Path, params_yaml: str = "") -> tuple[Path, Path, list[list[str]]]:
    """(params.yaml, the data folder, the folds) under `root`; `params_yaml` is applied last, as a profile."""
    names, objects = ["Joan", "Sam", "Mike", "Sara"], ["apples", "pencils", "marbles"]
    records = [{"id": str(i + 1), "dataset": "arithmetic", "equation": ["x = num1 + num2", "x = num1 - num2"][i % 2],
                "text": f"{names[i % 4]} has num1 {objects[i % 3]} . {names[(i + 1) % 4]} gives num2 more on day{i} . "
                        f"How many {objects[i % 3]} now ?"} for i in range(60)]  # day{i}: no two texts alike
    data = root / "data"
    write_jsonl(data / "processed" / "arithmetic.jsonl", records)
    folds = seeded_folds(records, 5, 1)
    write_json(data / "splits" / "arithmetic.json", {"dataset": "arithmetic", "folds": folds})
    test_ids = set(folds[0])
    write_jsonl(data / "keywords" / "arithmetic" / "fold0.jsonl",
                [{"id": r["id"], "split": "test" if r["id"] in test_ids else "train",
                  "noun": [w for w in r["text"].split() if w in objects], "tfidf": r["text"].split()[:2]}
                 for r in records])
    corpus = [r["text"] + " " + r["equation"] for r in records] + [GENERATOR_TEMPLATE, MWP2EQ_TEMPLATE]
    model = tiny_model_dir(root / "tiny-model", corpus)
    params = root / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_profile(params, ROOT / "profiles" / "smoke.yaml")
    (root / "tiny.yaml").write_text(f"train: {{model: {model}, device: cpu}}\n{params_yaml}")
    apply_profile(params, root / "tiny.yaml")
    return params, data, folds
