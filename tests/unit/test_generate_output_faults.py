"""Issue S2 ("hostile input, round two"), the command line's output: the request file as its own output (item 1), two
writers of one output (2), an output that cannot be written up front or mid-run (6), SIGTERM (14) and lines added
to an output before --resume (17). Each is one line naming the path and the cause; what was written is kept."""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest

from mwpgen.generate.output_lock import OutputLock
from tests.helpers.generate_faults import fail_at, one_line_error, rows_file
from tests.helpers.tiny_bundle import FAST, make_tiny_bundle, run_cli


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return make_tiny_bundle(tmp_path_factory.mktemp("tiny") / "ours")


def _no_model(monkeypatch):
    from mwpgen.generate import cli

    monkeypatch.setattr(cli, "resolve_model", lambda spec: pytest.fail("the model must not load"))


# ---------------------------------------------------------------------------------------------- 1. the same file

@pytest.mark.parametrize("link", ["same name", "symbolic link", "hard link"])
def test_the_request_file_is_never_its_own_output(capsys, monkeypatch, tmp_path, link):
    _no_model(monkeypatch)
    requests = rows_file(tmp_path, 2, "requests.csv")
    before = requests.read_bytes()
    output = {"same name": requests, "symbolic link": tmp_path / "sym.csv", "hard link": tmp_path / "hard.csv"}[link]
    if link == "symbolic link":
        output.symlink_to(requests)
    elif link == "hard link":
        os.link(requests, output)
    one_line_error(*run_cli(capsys, "--input", str(requests), "--output", str(output), "--format", "csv"),
                    f"--output {output} is the request file --input {requests} (the same file)")
    assert requests.read_bytes() == before


# ---------------------------------------------------------------------------------------------- 2. one writer

def test_a_second_writer_of_one_output_is_refused_naming_the_first(capsys, monkeypatch, bundle, tmp_path):
    out = tmp_path / "same.csv"
    argv = ["--model", str(bundle), "--equation", "x = 12 - 5", "--context", "apples", "--format", "csv",
            "--output", str(out), *FAST]
    first = OutputLock(out).acquire()  # a run writing `out` (flock: held per open file, so in this process too)
    try:
        with monkeypatch.context() as m:
            _no_model(m)
            one_line_error(*run_cli(capsys, *argv), f"--output {out} is being written by another mwpgen generate "
                            f"(pid {os.getpid()}, same.csv.lock)")
        assert not out.exists()
    finally:
        first.release()
    code, _, err = run_cli(capsys, *argv)  # the first one done: free again, and its lock file gone
    assert code == 0 and out.read_text().startswith("request,rank,") and not (tmp_path / "same.csv.lock").exists()


def test_a_lock_left_by_a_killed_run_is_taken_over(capsys, bundle, tmp_path):
    out = tmp_path / "o.csv"
    (tmp_path / "o.csv.lock").write_text("999999\n")  # no process holds it: its holder died
    code, _, err = run_cli(capsys, "--model", str(bundle), "--equation", "x = 12 - 5", "--context", "apples",
                           "--output", str(out), *FAST)
    assert code == 0, err


# ---------------------------------------------------------------------------------------------- 6. unwritable

def test_an_output_that_cannot_be_written_is_named_before_the_model_loads(capsys, monkeypatch, tmp_path):
    _no_model(monkeypatch)
    (tmp_path / "a_file").write_text("")
    argv = ["--equation", "x = 12 - 5", "--context", "apples", "--output"]
    for output, expected in ((tmp_path / "missing" / "o.json", f"the folder {tmp_path / 'missing'} does not exist"),
                             (tmp_path / "a_file" / "o.json", f"{tmp_path / 'a_file'} is not a folder"),
                             (Path("/dev/full"), "/dev/full is not a regular file")):
        one_line_error(*run_cli(capsys, *argv, str(output)), f"--output {output}")
        one_line_error(*run_cli(capsys, *argv, str(output)), expected)
    assert not Path("/dev/full.partial").exists() and not Path("/dev/full.lock").exists()


def test_a_read_only_folder_is_named(capsys, monkeypatch, tmp_path):
    _no_model(monkeypatch)
    folder = tmp_path / "read_only"
    folder.mkdir()
    real_access = os.access
    # as root (a container) a mode of 0o500 writes all the same, so the permission is what access() says
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == folder else real_access(p, mode))
    one_line_error(*run_cli(capsys, "--equation", "x = 12 - 5", "--context", "apples", "--output",
                             str(folder / "o.json")), f"the folder {folder} is not writable (permission denied)")


@pytest.mark.parametrize("fail_in", ["write", "marker"])
def test_a_full_disk_mid_run_says_what_is_kept_and_leaves_no_temporary_file(capsys, monkeypatch, bundle, tmp_path,
                                                                           fail_in):
    requests = rows_file(tmp_path, 4)
    out = tmp_path / "o.json"
    argv = ["--model", str(bundle), "--input", str(requests), "--format", "json", "--output", str(out), *FAST]
    calls = {"n": 0}
    if fail_in == "write":
        real_fsync = os.fsync

        def fsync(fd):  # start, request 1, request 2, then the disk is full
            calls["n"] += 1
            if calls["n"] == 4:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    else:
        real_replace = os.replace

        def replace(src, dst):
            calls["n"] += 1
            if calls["n"] == 4:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
    code, out_text, err = run_cli(capsys, *argv)
    where = out if fail_in == "write" else out.with_name("o.json.partial")
    one_line_error(code, out_text, err, f"could not write {where} (No space left on device): the first 2 of 4 "
                    f"requests are kept in {out}; --resume continues", exit_code=1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("o.json")) == ["o.json", "o.json.partial"]
    monkeypatch.undo()
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 0, err
    assert [p["request"] for p in json.loads(out.read_text())] == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------------- 14. SIGTERM

def test_sigterm_stops_as_ctrl_c_does_and_resume_continues(capsys, monkeypatch, bundle, tmp_path):
    requests = rows_file(tmp_path, 3)
    out = tmp_path / "o.csv"
    argv = ["--model", str(bundle), "--input", str(requests), "--format", "csv", "--output", str(out), *FAST]
    from mwpgen.generate.service import Service

    answer = Service.answer

    def terminated_at_2(self, request, i=0, deadline=None):
        if i == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises in this (the main) thread
        return answer(self, request, i, deadline)

    before = signal.getsignal(signal.SIGTERM)  # another test of this worker may have set one
    with monkeypatch.context() as m:
        m.setattr(Service, "answer", terminated_at_2)
        code, _, err = run_cli(capsys, *argv)
    assert code == 143
    assert err == f"mwpgen: terminated (SIGTERM) after 2 of 3 requests (written to {out}; continue with --resume)\n"
    assert signal.getsignal(signal.SIGTERM) is before  # put back
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 0 and len(out.read_text().splitlines()) == 4, err


# ---------------------------------------------------------------------------------------------- 17. added lines

def test_resume_says_what_it_cuts_and_keeps_it(capsys, monkeypatch, bundle, tmp_path):
    requests = rows_file(tmp_path, 3)
    out = tmp_path / "o.csv"
    argv = ["--model", str(bundle), "--input", str(requests), "--format", "csv", "--output", str(out), *FAST]
    with monkeypatch.context() as m:
        fail_at(m, 2, KeyboardInterrupt())
        assert run_cli(capsys, *argv)[0] == 130
    with open(out, "a", encoding="utf-8") as f:
        f.write("my own note\n")
    code, _, err = run_cli(capsys, *argv, "--resume")
    assert code == 0
    assert f"mwpgen: --resume: {out} held 12 bytes after its last complete request" in err
    assert (tmp_path / "o.csv.dropped").read_text() == "my own note\n"
    assert "my own note" not in out.read_text() and len(out.read_text().splitlines()) == 4


# ---------------------------------------------------------------------------------------------- 16. glued tokens

def test_a_number_token_glued_to_a_word_is_filled_with_its_space_put_back():
    from mwpgen.generate.request import fill_numbers

    text, numbers = fill_numbers("Tom put num2 apples in the basketnum1 . How many ?", {"num1": "12", "num2": "5"},
                                 seed=0)
    assert text == "Tom put 5 apples in the basket 12 . How many ?" and numbers == {"num1": "12", "num2": "5"}
    text, numbers = fill_numbers("A jarnum3 holds num1 .", {"num1": "12"}, seed=0)  # a glued distractor too
    assert "num" not in text and set(numbers) == {"num1", "num3"} and text.startswith("A jar ")
    assert fill_numbers("num1_a and 4num1", {"num1": "12"}, seed=0)[0] == "num1_a and 4num1"  # not number tokens
