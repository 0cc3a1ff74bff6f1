"""Where `mwpgen generate` writes, and how an unfinished --output FILE is resumed.

stdout gets each request's problems flushed as soon as they are ready. --output FILE gets them appended and synced
per request, and FILE.partial (the progress marker: how many requests and bytes are complete, and a fingerprint of
the requests and options) is replaced atomically after each; `--resume` cuts FILE back to the last complete request
and continues with the next one. The marker is removed when the run finishes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import IO, Sequence

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, CliError
from mwpgen.generate.model_resolution import RULE

PARTIAL_SUFFIX = ".partial"  # FILE.partial: the progress marker of an unfinished --output FILE


class Sink:
    """stdout: each request's problems flushed as soon as they are ready."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.done = 0  # requests complete
        self.any_written = False

    def start(self, text: str) -> None:
        self.write(text)

    def request_done(self, text: str, n_problems: int) -> None:
        self.write(text)
        self.done += 1
        self.any_written |= n_problems > 0

    def finish(self, text: str) -> None:
        self.write(text)

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def written(self) -> str:
        return "written above"

    def close(self) -> None:
        pass


class FileSink(Sink):
    """--output FILE: appended and synced per request; FILE.partial (replaced atomically) says how far it got."""

    def __init__(self, path: Path, fingerprint: str, total: int):
        super().__init__(open(path, "a", encoding="utf-8", newline=""))
        self.path, self.marker, self.fingerprint, self.total = path, partial_marker(path), fingerprint, total

    @classmethod
    def fresh(cls, path: Path, fingerprint: str, total: int) -> "FileSink":
        path.write_text("", encoding="utf-8")
        return cls(path, fingerprint, total)

    @classmethod
    def resumed(cls, path: Path, fingerprint: str, total: int, state: dict) -> "FileSink":
        with open(path, "r+b") as f:  # drop a request cut off half-written: only the marked bytes are complete
            # no request complete: start again from nothing, since the format's start is written again at done 0
            f.truncate(state["bytes"] if state["done"] else 0)
        sink = cls(path, fingerprint, total)
        sink.done, sink.any_written = state["done"], bool(state.get("any_written"))
        return sink

    def start(self, text: str) -> None:
        self.write(text)
        self.save_marker()

    def request_done(self, text: str, n_problems: int) -> None:
        super().request_done(text, n_problems)
        self.save_marker()

    def finish(self, text: str) -> None:
        self.write(text)
        self.stream.close()
        self.marker.unlink(missing_ok=True)

    def write(self, text: str) -> None:
        super().write(text)
        os.fsync(self.stream.fileno())  # the marker must never count bytes that a crash could still lose

    def save_marker(self) -> None:
        state = {"fingerprint": self.fingerprint, "requests": self.total, "done": self.done,
                 "bytes": self.stream.tell(), "any_written": self.any_written}
        tmp = self.marker.with_name(self.marker.name + ".tmp")
        tmp.write_text(json.dumps(state) + "\n", encoding="utf-8")
        os.replace(tmp, self.marker)  # atomic: a reader sees the old marker or the new one, never half of one

    def written(self) -> str:
        return f"written to {self.path}; continue with --resume"

    def close(self) -> None:
        if not self.stream.closed:
            self.stream.close()


def partial_marker(path: Path) -> Path:
    return path.with_name(path.name + PARTIAL_SUFFIX)


def judge_identity(judge: Path | None, model: Path) -> str:
    """The resolved judge as a resumed run must find it again: where it is (a judge the model packages: its place in
    the model, whose fetched copy moves to a new temporary folder on every run) and its judge.json (threshold,
    backbone, layer), so a judge retrained in place is another judge; "rule" without one."""
    from mwpgen.learned_judge import INFO_FILE

    if judge is None:
        return RULE
    judge = judge.resolve()
    where = judge.relative_to(model.resolve()) if judge.is_relative_to(model.resolve()) else judge
    try:
        info = (judge / INFO_FILE).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"the judge at {judge}: {INFO_FILE} cannot be read ({e})", EXIT_FAILED) from None
    return f"{where}\n{info}"


def run_fingerprint(args: argparse.Namespace, requests: Sequence, judge: str = RULE) -> str:
    """What a resumed run must share with the run it continues: the checked requests, the model, the judge
    (`judge`: judge_identity) and the format."""
    described = [args.model, judge, args.format, *(repr(item.request) for item in requests)]
    return hashlib.sha256("\n".join(map(str, described)).encode()).hexdigest()


def check_output(args: argparse.Namespace) -> bool:
    """--output and --resume as bad input before any model is fetched or loaded; False when --resume finds the run
    already finished (nothing to do)."""
    if args.output is None:
        if args.resume:
            raise CliError("--resume needs --output FILE (the file the stopped run wrote)", EXIT_BAD_INPUT)
        return True
    path, marker = args.output, partial_marker(args.output)
    if path.is_dir():
        raise CliError(f"--output {path} is a directory; give a file", EXIT_BAD_INPUT)
    if not args.resume and marker.exists():
        raise CliError(f"--output {path} holds an unfinished run ({marker.name}); continue it with --resume, or "
                       "remove both files to start again", EXIT_BAD_INPUT)
    if args.resume and not marker.exists() and path.exists():
        print(f"mwpgen: nothing to resume: {path} has no {marker.name}, so the run that wrote it finished",
              file=sys.stderr)
        return False
    return True


def open_sink(args: argparse.Namespace, requests: Sequence, fingerprint: str) -> Sink:
    """Where the problems go (check_output has passed): stdout, a fresh FILE, or the FILE of the run --resume
    continues, which must have been started with the same `fingerprint` (run_fingerprint)."""
    if args.output is None:
        return Sink(sys.stdout)
    path, marker = args.output, partial_marker(args.output)
    if not args.resume or not marker.exists():
        return FileSink.fresh(path, fingerprint, len(requests))
    state = read_marker(marker)
    if state.get("fingerprint") != fingerprint:
        raise CliError(f"--resume: {path} was started with other requests, options, model, judge or format; resume "
                       "with the same ones, or remove it and its marker to start again", EXIT_BAD_INPUT)
    if not path.exists() or path.stat().st_size < state["bytes"]:
        raise CliError(f"--resume: {path} is shorter than {marker.name} says it was; remove both to start again",
                       EXIT_BAD_INPUT)
    return FileSink.resumed(path, fingerprint, len(requests), state)


def read_marker(marker: Path) -> dict:
    try:
        state = json.loads(marker.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not all(isinstance(state.get(k), int) for k in ("done", "bytes")):
            raise ValueError("no counts")
        return state
    except (OSError, ValueError) as e:
        raise CliError(f"--resume: {marker} is unreadable ({e}); remove it and the output to start again",
                       EXIT_BAD_INPUT) from None
