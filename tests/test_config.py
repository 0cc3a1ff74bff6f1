"""params.yaml schema: the shipped file is valid, and every kind of mistake is named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mwpgen.config import Params, ParamsError, load_params, validate_params

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_params_are_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.split.n_folds == 5


def test_shipped_params_cover_every_section():
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert set(raw) == set(Params.model_fields)


@pytest.mark.parametrize(
    "raw, named",
    [
        ({"split": {"seeed": 1}}, ["split.seeed: unknown key", "allowed keys: n_folds, seed"]),
        ({"splitt": {}}, ["splitt: unknown key", "allowed keys: download"]),
        ({"split": {"n_folds": "five"}}, ["split.n_folds", "'five'"]),
        ({"split": {"n_folds": 1}}, ["split.n_folds", "greater than or equal to 2"]),
        ({"download": {"datasets": ["gsm8k"]}}, ["download.datasets.0", "'arithmetic', 'mawps' or 'math23k'"]),
        ({"translate": {"timeout_s": -1}}, ["translate.timeout_s", "greater than 0"]),
    ],
)
def test_errors_name_the_key(raw, named):
    with pytest.raises(ParamsError) as e:
        validate_params(raw, "p.yaml")
    for text in named:
        assert text in str(e.value)
    assert str(e.value).startswith("p.yaml:")


def test_invalid_yaml_names_line(tmp_path):
    bad = tmp_path / "params.yaml"
    bad.write_text("split:\n  n_folds: 5\n   seed: [\n")
    with pytest.raises(ParamsError, match=r"params.yaml:\d+:\d+: invalid YAML"):
        load_params(bad)


def test_flow_refuses_bad_params_before_work(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "params.yaml"
    bad.write_text("download:\n  retries: many\n")
    proc = subprocess.run([sys.executable, "-m", "flows.download", "--params", str(bad)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "download.retries" in proc.stderr and "many" in proc.stderr


def test_schema_defaults_are_the_shipped_default_profile():
    # A key deleted from params.yaml falls back to the same value the default run used.
    assert load_params(ROOT / "params.yaml") == Params()


def test_paper_profile_applies_and_validates(tmp_path):
    from mwpgen.config import apply_profile

    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    changed = apply_profile(params, ROOT / "profiles" / "paper.yaml")
    assert "train.model='gpt2-large'" in changed
    loaded = load_params(params)
    assert loaded.experiment.folds == [0, 1, 2, 3, 4] and loaded.train.generator.epochs == 20
    assert apply_profile(params, ROOT / "profiles" / "paper.yaml") == []  # idempotent
    # Only the changed values are rewritten: every comment and every other line of params.yaml stays.
    before, after = (ROOT / "params.yaml").read_text().splitlines(), params.read_text().splitlines()
    assert len(after) == len(before)
    kept = [b for b, a in zip(before, after) if a == b]
    assert before[0] in kept and len(kept) >= len(before) - len(changed) - 1
    assert "  model: gpt2-large" in "\n".join(after) and all("#" in a for a, b in zip(after, before) if "#" in b)
    with pytest.raises(ParamsError, match="no such profile"):
        apply_profile(params, ROOT / "profiles" / "nope.yaml")
