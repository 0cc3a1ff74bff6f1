"""A params.yaml integer longer than Python reads (issue S2 item 7): one line naming the file, line and key, not
ruamel's traceback; and the pipeline refuses it before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from mwpgen.config.files import ParamsError, parse_yaml
from mwpgen.config.schema import load_params

ROOT = Path(__file__).resolve().parents[2]


def test_a_5000_digit_integer_is_named_by_its_key():
    text = "train:\n  ours:\n    seeds: [1, " + "9" * 5000 + "]\n"
    with pytest.raises(ParamsError) as e:
        parse_yaml(text, "params.yaml")
    assert str(e.value) == "params.yaml:3: train.ours.seeds.1: an integer of 5,000 digits (at most 4,300 are read)"
    assert parse_yaml("a: " + "9" * 4300 + "\n", "p.yaml")["a"] == int("9" * 4300)  # at the limit: read


def test_the_pipeline_refuses_it_in_one_line(tmp_path, monkeypatch, capsys):
    import orchestration.pipeline as pipeline_cli

    text = (ROOT / "params.yaml").read_text().replace("  seed: 2021", "  seed: " + "1" * 5000, 1)
    assert "1" * 5000 in text
    (tmp_path / "params.yaml").write_text(text)
    with pytest.raises(ParamsError, match=r"split.seed: an integer of 5,000 digits"):
        load_params(tmp_path / "params.yaml")
    monkeypatch.setattr(pipeline_cli, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(pipeline_cli, "pipeline", lambda **kw: pytest.fail("the pipeline flow started"))
    monkeypatch.setattr("sys.argv", ["orchestration.pipeline"])
    with pytest.raises(SystemExit) as e:
        pipeline_cli.main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "an integer of 5,000 digits" in err
