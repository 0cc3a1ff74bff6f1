"""params.yaml schema: the shipped file is valid, and every kind of mistake is named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mwpgen.config.files import ParamsError, parse_yaml, read_yaml
from mwpgen.config.schema import Params, load_params, validate_params

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_params_are_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.split.n_folds == 5


def test_shipped_params_cover_every_section():
    raw = read_yaml(ROOT / "params.yaml")
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
        ({"tuning": {"corpora": ["corpus_round9"]}}, ["tuning.corpora.0", "'corpus_round2'"]),
        ({"tuning": {"candidates_from": ["gpt"]}}, ["tuning.candidates_from.0", "'ours-rft'"]),
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
    from mwpgen.config.profiles import apply_profile

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


def test_the_default_run_tunes_on_every_reading_round_and_serves_the_tuned_model():
    from mwpgen.judge.readings import CORPORA

    params = load_params(ROOT / "params.yaml")
    tuning = params.tuning
    assert tuning.methods == ["rft"] and tuning.corpora == list(CORPORA)
    assert set(tuning.candidates_from) == {"gpt_pre", "ours", "ours-rft"}  # every writer the corpora hold
    assert params.serve.model == "ours-rft"
    with pytest.raises(ParamsError, match="tuning.corpora.3"):  # the schema knows every corpus, and only those
        validate_params({"tuning": {"corpora": [*CORPORA, "corpus_round4"]}}, "p.yaml")
    with pytest.raises(ParamsError, match=r"serve.model: ours-rft is not made by this run \(tuning.methods: \[\]\)"):
        validate_params({"tuning": {"methods": []}}, "p.yaml")
    assert validate_params({"tuning": {"methods": []}, "serve": {"model": "ours"}}, "p.yaml").serve.model == "ours"


@pytest.mark.parametrize("spelling", ["3e-05", "3e-5", "3.0e-5", "3E-5", "0.00003", "+3e-05"])
def test_numbers_are_read_as_yaml_1_2(tmp_path, spelling):
    # `dvc exp run -S train.ours.lr=3e-5` writes `lr: 3e-05`: a float in YAML 1.2 (DVC's), a string in YAML 1.1.
    path = tmp_path / "params.yaml"
    path.write_text(f"train:\n  ours:\n    lr: {spelling}\n")
    assert validate_params(read_yaml(path)).train.ours.lr == 3e-05
    assert parse_yaml("a: 1e5\nb: 010\nc: 0o17\nd: true\ne: False\nf: [0, 1]\n", "x") == \
        {"a": 1e5, "b": 10, "c": 15, "d": True, "e": False, "f": [0, 1]}


def test_yaml_1_1_booleans_are_refused_with_a_hint(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  mixed_precision: yes\n")
    with pytest.raises(ParamsError, match=r"train.mixed_precision: .*boolean; got 'yes' \(params are YAML 1.2"):
        load_params(path)


def test_duplicate_keys_name_file_line_and_key(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  ours:\n    lr: 1.0e-5\n    batch_size: 4\n    lr: 2.0e-5\n")
    with pytest.raises(ParamsError) as e:
        load_params(path)
    assert str(e.value) == f"{path}:5: duplicate key train.ours.lr (first given on line 3)"
    path.write_text("split:\n  seed: 1\nsplit:\n  n_folds: 5\n")
    with pytest.raises(ParamsError, match=r"params.yaml:3: duplicate key split \(first given on line 1\)"):
        load_params(path)


def test_an_ablation_on_the_experiments_folds_or_with_no_variant_is_accepted():
    validate_params({"ablation": {"variants": ["tfidf"], "datasets": ["arithmetic"], "folds": [0]}})
    validate_params({"ablation": {"variants": [], "folds": [3]}})  # no variant: no ablate stage runs
    validate_params({"experiment": {"folds": [0, 1, 2]}, "ablation": {"variants": ["tfidf"], "folds": [2, 1]}})


@pytest.mark.parametrize(
    "raw, named",
    [
        ({"ablation": {"folds": [99]}}, ["ablation.folds: fold(s) [99] do not exist with split.n_folds = 5"]),
        ({"experiment": {"folds": [0, 5]}}, ["experiment.folds: fold(s) [5] do not exist", "0..4"]),
        ({"ablation": {"folds": [-1]}}, ["ablation.folds", "distinct fold indices"]),
        ({"experiment": {"folds": [1, 1]}}, ["experiment.folds", "distinct fold indices"]),
        ({"split": {"n_folds": 3}},
         ["split.n_folds: must be 5 while arithmetic is in download.datasets, experiment.datasets, "
          "ablation.datasets", "got 3"]),
        ({"split": {"n_folds": 6}, "ablation": {"folds": [5]}}, ["split.n_folds: must be 5"]),
        ({"train": {"ours": {"alpha": float("inf")}}}, ["train.ours.alpha: Input should be a finite number; got inf"]),
        ({"preprocess": {"constants": [1, float("nan")]}}, ["preprocess.constants.1", "finite number"]),
        ({"experiment": {"datasets": ["../../etc"]}},
         ["experiment.datasets.0: Input should be 'arithmetic', 'mawps' or 'math23k'; got '../../etc'"]),
        ({"experiment": {"subsample": {"math23": {"max_train": 10}}}}, ["experiment.subsample", "math23"]),
        ({"experiment": {"subsample": {"math23k": {"max_tets": 10}}}}, ["experiment.subsample.math23k.max_tets"]),
        # ablate depends on models/evaluator, data/keywords and models/judge of its folds: the experiment makes them
        ({"ablation": {"variants": ["tfidf"], "folds": [0, 1]}},
         ["ablation.datasets x ablation.folds: arithmetic fold 1 not in experiment.datasets x experiment.folds"]),
        ({"ablation": {"variants": ["tfidf"], "datasets": ["mawps"]}}, ["mawps fold 0 not in experiment.datasets"]),
    ],
)
def test_cross_field_and_value_checks_name_the_keys(raw, named):
    with pytest.raises(ParamsError) as e:
        validate_params(raw, "p.yaml")
    for text in named:
        assert text in str(e.value)


def test_n_folds_is_free_without_arithmetic():
    mawps = ["mawps"]
    params = validate_params({"split": {"n_folds": 3}, "download": {"datasets": mawps},
                              "experiment": {"datasets": mawps, "folds": [2]},
                              "ablation": {"datasets": mawps, "folds": [1]},
                              "tuning": {"methods": []}, "serve": {"model": "ours"}})
    assert params.split.n_folds == 3
    with pytest.raises(ParamsError, match="without it, set tuning.methods: \\[\\] and serve.model: ours"):
        validate_params({"experiment": {"datasets": mawps}})


def test_infinite_float_in_yaml_is_refused(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  ours:\n    alpha: .inf\n")
    with pytest.raises(ParamsError, match="train.ours.alpha: Input should be a finite number; got inf"):
        load_params(path)


def test_profile_is_read_as_yaml_1_2_and_checked_for_duplicates(tmp_path):
    from mwpgen.config.profiles import apply_profile

    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    profile = tmp_path / "fast.yaml"
    profile.write_text("train:\n  ours:\n    lr: 3e-05\n")
    assert apply_profile(params, profile) == ["train.ours.lr=3e-05"]
    assert load_params(params).train.ours.lr == 3e-05
    profile.write_text("train:\n  ours:\n    lr: 3e-05\n    lr: 4e-05\n")
    with pytest.raises(ParamsError, match=r"fast.yaml:4: duplicate key train.ours.lr"):
        apply_profile(params, profile)


def test_pipeline_validates_params_before_dvc(tmp_path, monkeypatch, capsys):
    # `python -m orchestration.pipeline` must refuse bad params itself (exit status 1, our message) before Prefect or
    # `dvc repro` start: DVC's matrix would otherwise meet an unknown dataset name first and fail with its own error.
    import orchestration.pipeline as pipeline_cli

    (tmp_path / "params.yaml").write_text("experiment:\n  datasets: [arithmetic, ../../etc]\n")
    monkeypatch.setattr(pipeline_cli, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(pipeline_cli, "pipeline", lambda **kw: pytest.fail("the pipeline flow started"))
    monkeypatch.setattr("sys.argv", ["orchestration.pipeline"])
    with pytest.raises(SystemExit) as e:
        pipeline_cli.main()
    assert e.value.code == 2  # a usage error: nothing ran
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("error: ") == 1
    assert "experiment.datasets.1: Input should be 'arithmetic', 'mawps' or 'math23k'; got '../../etc'" in err


def test_a_dataset_subsample_replaces_the_experiment_caps_and_a_model_cap_wins():
    from mwpgen import registry

    raw = read_yaml(ROOT / "params.yaml")
    raw["experiment"] |= {
        "max_train": 500,
        "max_test": 0,
        "subsample": {"math23k": {"max_train": 3000, "max_test": 600}},
    }
    raw["train"]["ours"]["max_train"] = 200
    params = validate_params(raw, "p.yaml")
    exp = params.experiment
    assert (exp.max_train_of("math23k"), exp.max_test_of("math23k")) == (3000, 600)
    assert (exp.max_train_of("mawps"), exp.max_test_of("mawps")) == (500, 0)  # not listed: the experiment's caps
    assert registry.max_train(params, "gpt_pre", "math23k") == 3000
    assert registry.max_train(params, "ours", "math23k") == 200  # the model's own cap first
    assert registry.max_train(params, "evaluator", "math23k") == 3000

    raw["experiment"]["subsample"]["math23k"]["evaluator_max_train"] = 0
    params = validate_params(raw, "p.yaml")
    assert registry.max_train(params, "evaluator", "math23k") == 0  # the whole training fold
    assert registry.max_train(params, "gpt_pre", "math23k") == 3000  # the generators keep the subsample
    assert registry.max_train(params, "evaluator", "mawps") == 500
    raw["experiment"]["subsample"]["math23k"]["evaluator_max_train"] = 6000
    assert registry.max_train(validate_params(raw, "p.yaml"), "evaluator", "math23k") == 6000


def test_pipeline_names_an_mlflow_server_that_does_not_answer_at_once(tmp_path, monkeypatch, capsys):
    import time

    import orchestration.pipeline as pipeline_cli
    from orchestration.prefect_api import free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setattr(pipeline_cli, "shared_api", lambda: pytest.fail("the Prefect server started"))
    monkeypatch.setattr("sys.argv", ["orchestration.pipeline"])
    start = time.time()
    with pytest.raises(SystemExit) as e:
        pipeline_cli.main()
    assert time.time() - start < 10
    assert "the MLflow tracking server http://127.0.0.1:" in str(e.value.code) and "does not answer" in str(
        e.value.code
    )


def test_a_params_file_without_a_section_is_refused_naming_it(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("")
    with pytest.raises(ParamsError, match=r"params.yaml: missing sections download, translate, .*ablation"):
        load_params(path)
    full = yaml.safe_load((ROOT / "params.yaml").read_text())
    del full["evaluate"]
    path.write_text(yaml.safe_dump(full))
    with pytest.raises(ParamsError, match=r"missing section evaluate \("):
        load_params(path)
