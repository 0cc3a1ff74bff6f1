"""A failing stage: one line naming what went wrong (first and last), exit code 1, its metrics marked failed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flows import common
from flows.common import run_stage


def failing(path):
    raise ValueError(f"{path}:3:7: expected a JSON object")


@pytest.fixture(autouse=True)
def no_repeat_at_exit(monkeypatch):
    """run_stage repeats its line when the interpreter exits: not at the end of this pytest process."""
    monkeypatch.setattr(common, "_FAILURE", [])


def test_a_failure_marks_the_stage_metrics_and_exits_with_one_line(tmp_path, capsys):
    metrics = tmp_path / "metrics.json"
    metrics.write_text('{"records": 23162}\n')  # the last good run's
    with pytest.raises(SystemExit) as exit_info:
        run_stage(failing, "data/raw/x.json", failed_metrics=[metrics])
    assert exit_info.value.code == 1
    assert json.loads(metrics.read_text()) == {"failed": "data/raw/x.json:3:7: expected a JSON object"}
    err = capsys.readouterr().err
    assert err.strip().splitlines()[0].startswith("error: data/raw/x.json:3:7: expected a JSON object")
    assert "Traceback" not in err


def test_the_error_line_is_also_the_last_line_after_interpreter_shutdown(tmp_path):
    code = ("import atexit, sys; from flows.common import run_stage\n"
            "atexit.register(lambda: print('late shutdown noise', file=sys.stderr))\n"
            "def boom(): raise RuntimeError('no trained model at models/x; run its train stage first')\n"
            "run_stage(boom)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1
    assert lines[0].startswith("error: no trained model at models/x") and lines[-1] == lines[0]
    assert "Traceback" not in proc.stderr


def test_debug_switch_shows_the_traceback(monkeypatch, capsys):
    monkeypatch.setenv("MWPGEN_DEBUG", "1")
    with pytest.raises(SystemExit):
        run_stage(failing, "p")
    assert "Traceback" in capsys.readouterr().err


def test_a_stage_that_succeeds_ends_its_process_after_the_exit_handlers(tmp_path):
    """Success ends the process with status 0 after every exit handler has run, with what it printed flushed; the
    code after run_stage never runs."""
    done = tmp_path / "handler-ran"
    code = ("import atexit, sys; from flows.common import run_stage\n"
            f"atexit.register(lambda: open({str(done)!r}, 'w').write('yes'))\n"
            "def work(): print('stage output', end='')\n"
            "run_stage(work)\n"
            "print('after run_stage')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "stage output"
    assert done.read_text() == "yes"


def test_train_ours_without_the_evaluator_names_the_file_and_the_stage_to_run(tmp_path):
    """ours' co-trained mwp2eq is trained up to the evaluator's parse accuracy: without the evaluator's metrics (or
    with metrics that lack it) the error names the file and the stage that writes it."""
    from flows.train_ours import evaluator_parse_accuracy
    from mwpgen.paths import FoldPaths

    paths = FoldPaths(tmp_path, "ours", "mawps", 2)
    with pytest.raises(FileNotFoundError, match=r"metrics/train/evaluator/mawps/fold2\.json is missing.*"
                                                r"dvc repro train_evaluator@mawps-2"):
        evaluator_parse_accuracy(paths)
    metrics = paths.evaluator.train_metrics
    metrics.parent.mkdir(parents=True)
    metrics.write_text('{"steps": 3}', encoding="utf-8")
    with pytest.raises(ValueError, match="no best_val_parse_accuracy"):
        evaluator_parse_accuracy(paths)
    metrics.write_text('{"best_val_parse_accuracy": 0.67}', encoding="utf-8")
    assert evaluator_parse_accuracy(paths) == 0.67
