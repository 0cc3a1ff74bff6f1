"""What `mwpgen generate` tells the user when it stops: one line and an exit code (every part of the command line
raises CliError; mwpgen.generate.cli.main prints it)."""

from __future__ import annotations

DEBUG_ENV = "MWPGEN_DEBUG"  # =1: a traceback beside the one line
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: stopped by a SIGTERM, reported as a Ctrl-C is (stop_signals.py)


class CliError(Exception):
    """One line for the user and the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code
