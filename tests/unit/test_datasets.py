import json
import os
import time
from pathlib import Path

import pytest

from mwpgen.data.raw import (
    RawProblem,
    math23k_english,
    read_arithmetic,
    read_arithmetic_folds,
    read_math23k,
    read_math23k_reference,
    read_mawps,
    read_translated_math23k,
)
from mwpgen.io import DataFormatError

MIRROR = Path(os.environ.get("MWPGEN_MIRROR", Path(__file__).resolve().parents[2].parent / "shared" / "data" / "raw"))


def needs_mirror(relative: str) -> Path:
    path = MIRROR / relative
    if not path.exists():
        pytest.skip(f"shared raw data not available: {path}")
    return path


def math23k_text(records: list[dict]) -> str:
    """The real file's layout: 7-line pretty-printed objects, concatenated."""
    return "".join("{\n" + ",\n".join(f'    "{k}":{json.dumps(v, ensure_ascii=False)}' for k, v in r.items())
                   + "\n}\n" for r in records)


def zh(i: int) -> dict:
    return {"id": str(i), "original_text": f"第{i}题，有{i}个苹果", "segmented_text": "…", "equation": f"x={i}+1",
            "ans": str(i + 1)}


ARITH = [{"iIndex": 1, "sQuestion": "Joan found 70.0 seashells .", "lEquations": ["X=(70.0-27.0)"],
          "lSolutions": [43.0]},
         {"iIndex": 5, "sQuestion": "Sam has 3.0 cards .", "lEquations": ["X=(3.0+1.0)"], "lSolutions": [4.0]}]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_read_arithmetic(tmp_path):
    problems = read_arithmetic(write(tmp_path / "q.json", json.dumps(ARITH, indent=1)))
    assert problems == [RawProblem("arithmetic", "1", "Joan found 70.0 seashells .", "X=(70.0-27.0)"),
                        RawProblem("arithmetic", "5", "Sam has 3.0 cards .", "X=(3.0+1.0)")]


def test_read_mawps(tmp_path):
    rows = [{"id": 1, "original_text": "Bryan has 56 books in 9 shelves .", "equation": "x=56*9", "ans": 504.0}]
    assert read_mawps(write(tmp_path / "m.json", json.dumps(rows))) == \
        [RawProblem("mawps", "1", "Bryan has 56 books in 9 shelves .", "x=56*9")]


def test_read_math23k_concatenated_objects(tmp_path):
    path = write(tmp_path / "Math_23K.json", math23k_text([zh(1), zh(2)]))
    assert read_math23k(path) == [RawProblem("math23k", "1", "第1题，有1个苹果", "x=1+1"),
                                  RawProblem("math23k", "2", "第2题，有2个苹果", "x=2+1")]


def test_read_math23k_is_linear(tmp_path):
    path = write(tmp_path / "Math_23K.json", math23k_text([zh(i) for i in range(1, 23163)]))
    start = time.perf_counter()
    assert len(read_math23k(path)) == 23162
    assert time.perf_counter() - start < 3.0  # quadratic re-scanning would take minutes


def test_truncated_json_names_file_and_line(tmp_path):
    text = math23k_text([zh(1), zh(2), zh(3)])
    path = write(tmp_path / "Math_23K.json", text[: text.index('"equation":"x=3')])
    with pytest.raises(DataFormatError) as info:
        read_math23k(path)
    # the line where parsing failed (end of file), and the line where the broken record starts
    assert str(path) in str(info.value) and info.value.line == 19
    assert "starting at line 15" in str(info.value)


def test_truncated_array_names_file(tmp_path):
    text = json.dumps(ARITH, indent=1)
    for cut in (len(text) - 1, text.index('"iIndex": 5') + 5):
        path = write(tmp_path / "q.json", text[:cut])
        with pytest.raises(DataFormatError) as info:
            read_arithmetic(path)
        assert info.value.path == str(path) and info.value.line is not None


def test_missing_key_names_key_and_record_line(tmp_path):
    records = [zh(1), zh(2)]
    del records[1]["equation"]
    with pytest.raises(DataFormatError) as info:
        read_math23k(write(tmp_path / "Math_23K.json", math23k_text(records)))
    assert "'equation'" in str(info.value) and "record 1" in str(info.value) and info.value.line == 8


def test_wrong_type_is_reported(tmp_path):
    rows = [{"id": 1, "original_text": ["not", "a", "string"], "equation": "x=1"}]
    with pytest.raises(DataFormatError, match="original_text"):
        read_mawps(write(tmp_path / "m.json", json.dumps(rows)))
    with pytest.raises(DataFormatError, match="expected a JSON array"):
        read_mawps(write(tmp_path / "m2.json", json.dumps(rows[0])))
    bad = [dict(ARITH[0], lEquations=[])]
    with pytest.raises(DataFormatError, match="lEquations"):
        read_arithmetic(write(tmp_path / "q.json", json.dumps(bad)))


def test_read_arithmetic_folds(tmp_path):
    for k in range(5):
        write(tmp_path / f"fold{k}.txt", f"{k}1\n{k}2 {k}3\n")
    assert read_arithmetic_folds(tmp_path)[2] == ["21", "22", "23"]
    write(tmp_path / "fold3.txt", "31\nabc\n")
    with pytest.raises(DataFormatError) as info:
        read_arithmetic_folds(tmp_path)
    assert info.value.line == 2 and "fold3.txt" in str(info.value)


def test_read_math23k_reference_and_join(tmp_path):
    mwp = write(tmp_path / "mwp.json", json.dumps(["There are 1 apples .", "There are 2 apples ."]))
    eqs = write(tmp_path / "eqs.json", json.dumps([["x = 1 + 1"], ["x = 2 + 1"]]))
    reference = read_math23k_reference(mwp, eqs)
    assert reference == [("1", "There are 1 apples ."), ("2", "There are 2 apples .")]
    chinese = [RawProblem("math23k", "2", "…", "x=2+1"), RawProblem("math23k", "1", "…", "x=1+1")]
    assert math23k_english(chinese, reference)[0] == RawProblem("math23k", "2", "There are 2 apples .", "x=2+1")
    write(eqs, json.dumps([["x = 1 + 1"]]))
    with pytest.raises(DataFormatError, match="1 equations but 2 texts"):
        read_math23k_reference(mwp, eqs)


def test_read_translated_math23k(tmp_path):
    rows = [{"id": "1", "text_zh": "…", "text": "There are 11 trees .", "equation": "x=(11-1)*2"}]
    path = write(tmp_path / "math23k.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert read_translated_math23k(path) == [RawProblem("math23k", "1", "There are 11 trees .", "x=(11-1)*2")]
    write(path, json.dumps(rows[0]) + "\n\n" + json.dumps({"id": "2", "text": "x"}) + "\n")
    with pytest.raises(DataFormatError) as info:
        read_translated_math23k(path)
    assert info.value.line == 3 and "'equation'" in str(info.value)
    write(path, json.dumps(rows[0]) + "\n" + '{"id": "2", "te')
    with pytest.raises(DataFormatError) as info:
        read_translated_math23k(path)
    assert info.value.line == 2


# --- tests below read the shared raw data (skipped when it is absent) ---

def test_real_files_record_counts():
    assert len(read_arithmetic(needs_mirror("arithmetic/questions.json"))) == 1492
    assert len(read_mawps(needs_mirror("mawps/MAWPS.json"))) == 2373
    folds = read_arithmetic_folds(needs_mirror("arithmetic/aggregate"))
    assert [len(f) for f in folds] == [298, 298, 299, 298, 299]


def test_real_math23k_truncated_copy(tmp_path):
    text = needs_mirror("math23k/Math_23K.json").read_text(encoding="utf-8")
    cut = text.index('"id":"101"') + 20  # record 101 opens on line 701; the cut falls in line 703
    with pytest.raises(DataFormatError) as info:
        read_math23k(write(tmp_path / "Math_23K.json", text[:cut]))
    assert info.value.path.endswith("Math_23K.json") and info.value.line == 703
    assert "starting at line 701" in str(info.value)


def test_real_arithmetic_truncated_copy(tmp_path):
    text = needs_mirror("arithmetic/questions.json").read_text(encoding="utf-8")
    with pytest.raises(DataFormatError) as info:
        read_arithmetic(write(tmp_path / "questions.json", text[: len(text) // 2]))
    assert info.value.line is not None and "questions.json" in str(info.value)
