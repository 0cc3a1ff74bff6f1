"""SIGTERM (kill, a scheduler's stop, a container's shutdown) ends `mwpgen generate` as Ctrl-C does: the requests
written are kept and said, with how --resume continues; the exit code is 143 (128 + SIGTERM), Ctrl-C's 130."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mwpgen.generate.cli_errors import EXIT_INTERRUPTED, EXIT_TERMINATED


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler; caught wherever a Ctrl-C is."""


def how_stopped(e: KeyboardInterrupt) -> tuple[str, int]:
    """("interrupted", 130) for a Ctrl-C, ("terminated (SIGTERM)", 143) for a SIGTERM."""
    return ("terminated (SIGTERM)", EXIT_TERMINATED) if isinstance(e, Terminated) else ("interrupted", EXIT_INTERRUPTED)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Terminated for the duration (the previous handler put back after); only the main thread can
    set a handler, so elsewhere (a test thread, an embedding program) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
