"""Integration: the data stages through the pipeline flow (`dvc repro` under a parent MLflow run) on the real
mirror, in a scratch copy of the project."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

from tests.helpers.scratch_project import MIRROR, copy_project, run_in, scratch_env

DATA_STAGES = ["download", "translate", "preprocess", "split"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.skipif(not (MIRROR / "math23k" / "Math_23K.json").exists(), reason=f"no data mirror at {MIRROR}"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory, prefect_api):
    dest = tmp_path_factory.mktemp("project")
    copy_project(dest)
    return dest, scratch_env(dest)


def run(cmd, project, check=True):
    dest, env = project
    return run_in(dest, env, cmd, check)


def ran_stages(output: str) -> list[str]:
    return [s for s in DATA_STAGES if f"Running stage '{s}'" in output]


def test_pipeline_builds_the_data_stages(project, prefect_api):
    dest, _ = project
    # The last stage alone as target: DVC reproduces the ones upstream, and the pipeline pushes them all.
    proc = run([sys.executable, "-m", "orchestration.pipeline", DATA_STAGES[-1]], project)
    assert ran_stages(proc.stdout + proc.stderr) == DATA_STAGES
    cloud = run([sys.executable, "-m", "dvc", "status", "--cloud", *DATA_STAGES], project)
    assert "in sync" in cloud.stdout, cloud.stdout
    # One Prefect API (the session's, PREFECT_API_URL): no stage started a temporary server of its own, and the
    # pipeline's flow run and every stage's are in that server.
    assert "Starting temporary server" not in proc.stdout + proc.stderr
    assert f"Prefect API for every stage: {prefect_api}" in proc.stdout
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # The server named explicitly: another test on this worker may have left this process's Prefect settings
    # pointing elsewhere (they are read once, not from os.environ at each call); unnamed, a temporary server answers.
    with temporary_settings({PREFECT_API_URL: prefect_api}), get_client(sync_client=True) as client:
        flows = {f.id: f.name for f in client.read_flows(flow_filter=FlowFilter(name=FlowFilterName(
            any_=["pipeline", *DATA_STAGES])))}
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["pipeline", *DATA_STAGES])))
    assert {flows[r.flow_id] for r in runs if r.state_type.value == "COMPLETED"} == {"pipeline", *DATA_STAGES}
    stats = json.loads((dest / "metrics" / "data_stats.json").read_text())
    assert {d: stats[d]["ours"]["mwps"] for d in stats} == {"arithmetic": 1492, "mawps": 2373, "math23k": 23162}
    for d, s in stats.items():
        assert s["ours"]["quarantined"] / s["ours"]["mwps"] < 0.02, d
        lines = (dest / "data" / "processed" / f"{d}.jsonl").read_text().splitlines()
        quarantined = (dest / "data" / "quarantine" / f"{d}.jsonl").read_text().splitlines()
        assert len(lines) + len(quarantined) == s["ours"]["mwps"]  # nothing silently dropped
    for d in stats:
        folds = json.loads((dest / "data" / "splits" / f"{d}.json").read_text())["folds"]
        assert len(folds) == 5 and sum(map(len, folds)) == stats[d]["ours"]["kept"]
    assert json.loads((dest / "metrics" / "translate.json").read_text())["untranslated"] == 0


def test_stage_runs_are_children_of_the_pipeline_run(project):
    dest, _ = project
    db = sqlite3.connect(dest / "mlflow.db")
    runs = dict(db.execute("select run_uuid, name from runs").fetchall())
    parents = dict(db.execute("select run_uuid, value from tags where key = 'mlflow.parentRunId'").fetchall())
    pipeline = [r for r, name in runs.items() if name.startswith("pipeline · ")]
    assert len(pipeline) == 1 and runs[pipeline[0]].endswith(" · split")  # `pipeline · <profile> · <targets>`
    children = sorted(runs[r] for r, p in parents.items() if p == pipeline[0])
    assert children == sorted(DATA_STAGES)
    split_run = next(r for r, name in runs.items() if name == "split" and parents.get(r) == pipeline[0])
    params = dict(db.execute("select key, value from params where run_uuid = ?", [split_run]).fetchall())
    assert params["n_folds"] == "5"


def test_second_repro_is_a_noop(project):
    proc = run(["dvc", "repro", *DATA_STAGES], project)
    assert ran_stages(proc.stdout) == [] and "up to date" in proc.stdout


def test_split_param_change_reruns_only_split(project):
    dest, _ = project
    params = dest / "params.yaml"
    params.write_text(params.read_text().replace("seed: 2021", "seed: 7"))
    proc = run(["dvc", "repro", *DATA_STAGES], project)
    assert ran_stages(proc.stdout) == ["split"]


def test_corrupt_raw_file_is_named_and_nothing_is_lost(project):
    dest, _ = project
    raw = dest / "data" / "raw" / "mawps" / "MAWPS.json"
    processed = {p.name: p.read_bytes() for p in (dest / "data" / "processed").iterdir()}
    raw.chmod(0o644)
    raw.write_bytes(raw.read_bytes()[:5000])  # truncated mid-record
    proc = run([sys.executable, "-m", "flows.preprocess"], project, check=False)
    assert proc.returncode != 0
    assert "data/raw/mawps/MAWPS.json:" in proc.stdout + proc.stderr  # file:line:col named
    assert {p.name: p.read_bytes() for p in (dest / "data" / "processed").iterdir()} == processed
    # dvc repro sees the raw file changed; download re-verifies it against its sha256 and restores it.
    proc = run(["dvc", "repro", *DATA_STAGES], project)
    assert "download" in ran_stages(proc.stdout)
    assert json.loads((dest / "metrics" / "download.json").read_text())["mawps/MAWPS.json"]["origin"] == "mirror"
    assert {p.name: p.read_bytes() for p in (dest / "data" / "processed").iterdir()} == processed


def test_ctrl_c_stops_the_pipeline_in_one_line(project):
    """Ctrl-C mid-stage: the running stage is interrupted, and the pipeline says so in one line, no traceback."""
    import signal
    import subprocess

    from orchestration.prefect_api import sigint_at_default

    dest, env = project
    # As from a terminal: a suite started in the background (`nohup ... &`) hands its children SIGINT ignored.
    proc = subprocess.Popen([sys.executable, "-m", "orchestration.pipeline", "--force", "preprocess"], cwd=dest,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=sigint_at_default)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("> python -m flows.preprocess"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=120) == 130  # as a shell reports a Ctrl-C
    output = "".join(seen) + rest
    assert "Traceback" not in output, output
    assert rest.rstrip().splitlines()[-1].startswith("interrupted: the running stage was stopped"), rest
