"""Where `mwpgen generate` writes, and how an unfinished --output FILE is resumed.

stdout gets each request's problems flushed as soon as they are ready. --output FILE gets them appended and synced
per request, and FILE.partial (the progress marker: how many requests and bytes are complete, and a fingerprint of
the requests and options) is replaced atomically after each; `--resume` cuts FILE back to the last complete request
and continues with the next one. The marker is removed when the run finishes. What is checked before (the place, the
request file, the marker) is in output_checks.py; one writer at a time, output_lock.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, CliError
from mwpgen.generate.model_resolution import RULE

PARTIAL_SUFFIX = ".partial"  # FILE.partial: the progress marker of an unfinished --output FILE
DROPPED_SUFFIX = ".dropped"  # FILE.dropped: what --resume cut from FILE after its last complete request


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
        self.marked = 0  # requests complete as the marker on disk says: what a failed write still keeps

    @classmethod
    def fresh(cls, path: Path, fingerprint: str, total: int) -> FileSink:
        path.write_text("", encoding="utf-8")
        return cls(path, fingerprint, total)

    @classmethod
    def resumed(cls, path: Path, fingerprint: str, total: int, state: dict) -> FileSink:
        """FILE cut back to the marker's complete requests; what followed them (a request cut off half-written, or
        lines added since) is moved to FILE.dropped and said, never dropped unseen."""
        keep_dropped(path, state["bytes"])
        with open(path, "r+b") as f:
            # no request complete: start again from nothing, since the format's start is written again at done 0
            f.truncate(state["bytes"] if state["done"] else 0)
        sink = cls(path, fingerprint, total)
        sink.done = sink.marked = state["done"]
        sink.any_written = bool(state.get("any_written"))
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
        try:
            super().write(text)
            os.fsync(self.stream.fileno())  # the marker must never count bytes that a crash could still lose
        except OSError as e:  # a full disk, a vanished mount: the requests already marked stay resumable
            raise self.write_failed(self.path, e) from None

    def save_marker(self) -> None:
        state = {"fingerprint": self.fingerprint, "requests": self.total, "done": self.done,
                 "bytes": self.stream.tell(), "any_written": self.any_written}
        tmp = self.marker.with_name(self.marker.name + ".tmp")
        try:
            tmp.write_text(json.dumps(state) + "\n", encoding="utf-8")
            os.replace(tmp, self.marker)  # atomic: a reader sees the old marker or the new one, never half of one
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise self.write_failed(self.marker, e) from None
        self.marked = self.done

    def write_failed(self, where: Path, e: OSError) -> CliError:
        """The error to raise for a failed write; with no request complete, FILE and its marker are removed (they
        hold nothing to keep, and a marker without its start would mislead --resume)."""
        if self.marked:
            kept = f"the first {self.marked} of {self.total} requests are kept in {self.path}; --resume continues"
        else:
            kept = "no request was complete, so nothing is kept; run it again"
            for leftover in (self.path, self.marker):
                try:
                    leftover.unlink(missing_ok=True)
                except OSError:
                    pass
        return CliError(f"could not write {where} ({e.strerror or e}): {kept}", EXIT_FAILED)

    def written(self) -> str:
        return f"written to {self.path}; continue with --resume"

    def close(self) -> None:
        if not self.stream.closed:
            try:
                self.stream.close()
            except OSError:  # the failed write's buffer, flushed again: already reported by write_failed
                pass


def partial_marker(path: Path) -> Path:
    return path.with_name(path.name + PARTIAL_SUFFIX)


def keep_dropped(path: Path, complete_bytes: int) -> None:
    """The bytes of FILE after its last complete request appended to FILE.dropped, and said on stderr."""
    with open(path, "rb") as f:
        f.seek(complete_bytes)
        tail = f.read()
    if not tail:
        return
    dropped = path.with_name(path.name + DROPPED_SUFFIX)
    with open(dropped, "ab") as f:
        f.write(tail)
    print(f"mwpgen: --resume: {path} held {len(tail)} bytes after its last complete request (a request cut off, or "
          f"lines added since the run stopped); moved them to {dropped}", file=sys.stderr)


def judge_identity(judge: Path | None, model: Path) -> str:
    """The resolved judge as a resumed run must find it again: where it is (a judge the model packages: its place in
    the model, whose fetched copy moves to a new temporary folder on every run) and its judge.json (threshold,
    backbone, layer), so a judge retrained in place is another judge; "rule" without one."""
    from mwpgen.judge.saved import INFO_FILE

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
    (`judge`: judge_identity), the format and its columns (a file begun by a version that wrote other fields is not
    continued with these)."""
    from mwpgen.generate.output_format import CSV_COLUMNS

    described = [args.model, judge, args.format, ",".join(CSV_COLUMNS), *(repr(item.request) for item in requests)]
    return hashlib.sha256("\n".join(map(str, described)).encode()).hexdigest()


def open_sink(args: argparse.Namespace, requests: Sequence, fingerprint: str) -> Sink:
    """Where the problems go (output_checks passed, the output's lock held): stdout, a fresh FILE, or the FILE of the
    run --resume continues, which must have been started with the same `fingerprint` (run_fingerprint)."""
    if args.output is None:
        return Sink(sys.stdout)
    path, marker = args.output, partial_marker(args.output)
    if not args.resume or not marker.exists():
        try:
            return FileSink.fresh(path, fingerprint, len(requests))
        except OSError as e:
            raise CliError(f"--output {path}: cannot write it ({e.strerror or e})", EXIT_FAILED) from None
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
