"""`--profile`: a bare name means profiles/<name>.yaml, a path is read as given; an empty or non-mapping profile is an
error naming the file, before params.yaml is touched or the pipeline starts (issue 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mwpgen.config.files import ParamsError
from mwpgen.config.profiles import apply_profile, resolve_profile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch, prefect_api):
    """A scratch PROJECT_ROOT (params.yaml + profiles/) for orchestration.pipeline.main; the flow itself never runs.
    The session's Prefect server (PREFECT_API_URL) stands in for the one main would start."""
    import orchestration.pipeline as pipeline_cli

    root = tmp_path / "project"
    (root / "profiles").mkdir(parents=True)
    (root / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    (root / "profiles" / "fast.yaml").write_text("train:\n  ours:\n    lr: 4e-05\n")
    started = []
    monkeypatch.setattr(pipeline_cli, "PROJECT_ROOT", root)
    monkeypatch.setattr(pipeline_cli, "pipeline", lambda **kw: started.append(kw))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")  # made while the server starts

    def main(*argv: str) -> list:
        monkeypatch.setattr("sys.argv", ["orchestration.pipeline", *argv])
        pipeline_cli.main()
        return started

    main.root = root
    return main


def test_resolve_profile_name_or_path(tmp_path):
    profiles = tmp_path / "profiles"
    assert resolve_profile("paper", profiles) == profiles / "paper.yaml"
    given = tmp_path / "some" / "dir" / "x.yaml"
    given.parent.mkdir(parents=True)
    given.write_text("train: {}\n")
    assert resolve_profile(str(given), profiles) == given
    assert resolve_profile(given, profiles) == given  # a Path too
    yml = given.with_suffix(".yml")
    yml.write_text("train: {}\n")
    assert resolve_profile(str(yml), profiles) == yml


def test_pipeline_reads_a_profile_given_as_a_path(project, tmp_path, capsys):
    elsewhere = tmp_path / "some" / "dir" / "x.yaml"  # not under profiles/: was looked up as profiles/x.yaml.yaml
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("train:\n  ours:\n    lr: 3e-05\n")
    started = project("--profile", str(elsewhere))
    assert started, "the pipeline did not start"
    assert "lr: 3e-05" in (project.root / "params.yaml").read_text()
    assert "train.ours.lr=3e-05" in capsys.readouterr().out


def test_pipeline_reads_a_relative_yaml_name_from_the_current_directory(project, tmp_path, monkeypatch):
    (tmp_path / "mine.yml").write_text("train:\n  ours:\n    lr: 2e-05\n")
    monkeypatch.chdir(tmp_path)
    assert project("--profile", "mine.yml")
    assert "lr: 2e-05" in (project.root / "params.yaml").read_text()


def test_pipeline_bare_name_is_still_profiles_dir(project):
    assert project("--profile", "fast")
    assert "lr: 4e-05" in (project.root / "params.yaml").read_text()


def test_missing_profile_path_names_the_path_and_the_bare_name(project, tmp_path, capsys):
    before = (project.root / "params.yaml").read_text()
    with pytest.raises(SystemExit) as e:
        project("--profile", str(tmp_path / "nowhere" / "fast.yaml"))
    assert e.value.code == 2  # a usage error
    msg = capsys.readouterr().err
    assert msg.startswith("error: ") and str(tmp_path / "nowhere" / "fast.yaml") in msg
    assert "no such profile file" in msg and "--profile fast" in msg  # profiles/fast.yaml exists: the hint
    assert ".yaml.yaml" not in msg
    assert (project.root / "params.yaml").read_text() == before


@pytest.mark.parametrize("content, what", [("", "empty profile"), ("# only a comment\n", "empty profile"),
                                           ("[]\n", "got list"), ("- train\n", "got list"),
                                           ("paper\n", "got str"), ("{}\n", "empty profile")])
def test_empty_or_non_mapping_profile_is_an_error(tmp_path, content, what):
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    profile = tmp_path / "blank.yaml"
    profile.write_text(content)
    with pytest.raises(ParamsError, match=what) as e:
        apply_profile(params, profile)
    assert str(e.value).startswith(str(profile))
    assert params.read_text() == (ROOT / "params.yaml").read_text()  # nothing written


def test_pipeline_refuses_an_empty_profile_before_starting(project, capsys):
    (project.root / "profiles" / "blank.yaml").write_text("")
    before = (project.root / "params.yaml").read_text()
    with pytest.raises(SystemExit) as e:
        project("--profile", "blank")
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and "blank.yaml: empty profile" in err
    assert (project.root / "params.yaml").read_text() == before


def test_a_smoke_run_lets_torch_threads_sleep_while_they_wait_and_a_real_run_does_not(monkeypatch):
    from mwpgen.config.schema import Params
    from orchestration.pipeline import stage_env

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    real = Params()
    smoke = real.model_copy(update={"experiment": real.experiment.model_copy(update={"smoke": True})})
    assert "OMP_WAIT_POLICY" not in stage_env(real, "r1")
    assert stage_env(smoke, "r1")["OMP_WAIT_POLICY"] == "PASSIVE"
    assert stage_env(smoke, "r1")["MWPGEN_PARENT_RUN_ID"] == "r1"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # a user's own choice stands
    assert stage_env(smoke, "r1")["OMP_WAIT_POLICY"] == "ACTIVE"


SHIPPED = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "profiles").glob("*.yaml"))


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_applies_to_the_default_params(tmp_path, profile):
    """A profile that no longer validates against today's schema would fail only when someone runs it, hours in."""
    from mwpgen.config.profiles import apply_profile

    root = Path(__file__).resolve().parents[2]
    params = tmp_path / "params.yaml"
    params.write_text((root / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    changed = apply_profile(params, root / "profiles" / f"{profile}.yaml")
    assert changed, f"profiles/{profile}.yaml changes nothing"
    if profile == "folds":
        assert changed == ["experiment.folds=[0, 1, 2, 3, 4]"]
