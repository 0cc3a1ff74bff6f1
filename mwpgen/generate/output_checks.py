"""--output FILE and --resume checked before any model is fetched or loaded: each problem a user can fix is one line
naming the path and the cause, exit 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, CliError
from mwpgen.generate.output_file import partial_marker


def check_output_place(args: argparse.Namespace) -> None:
    """FILE can be written, resumed and synced where it is, and is not the request file being read."""
    if args.output is None:
        if args.resume:
            raise CliError("--resume needs --output FILE (the file the stopped run wrote)", EXIT_BAD_INPUT)
        return
    path = args.output
    if path.is_dir():
        raise CliError(f"--output {path} is a directory; give a file", EXIT_BAD_INPUT)
    if path.exists() and not path.is_file():
        raise CliError(f"--output {path} is not a regular file (a device, pipe or socket): --output writes a file it "
                       "can sync and resume; leave --output out to write to stdout", EXIT_BAD_INPUT)
    folder = path.parent
    if not folder.exists():
        raise CliError(f"--output {path}: the folder {folder} does not exist", EXIT_BAD_INPUT)
    if not folder.is_dir():
        raise CliError(f"--output {path}: {folder} is not a folder", EXIT_BAD_INPUT)
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        where = path if path.exists() else f"the folder {folder}"
        raise CliError(f"--output {path}: {where} is not writable (permission denied)", EXIT_BAD_INPUT)
    if args.input is not None and path.exists() and _same_file(path, args.input):
        raise CliError(f"--output {path} is the request file --input {args.input} (the same file); writing would "
                       "overwrite the requests: give another output file", EXIT_BAD_INPUT)


def check_resume(args: argparse.Namespace) -> bool:
    """--resume against FILE.partial (with the output's lock held: no other run changes them); False when --resume
    finds the run already finished (nothing to do)."""
    if args.output is None:
        return True
    path, marker = args.output, partial_marker(args.output)
    if not args.resume and marker.exists():
        raise CliError(f"--output {path} holds an unfinished run ({marker.name}); continue it with --resume, or "
                       "remove both files to start again", EXIT_BAD_INPUT)
    if args.resume and not marker.exists() and path.exists():
        print(f"mwpgen: nothing to resume: {path} has no {marker.name}, so the run that wrote it finished",
              file=sys.stderr)
        return False
    return True


def _same_file(a: Path, b: Path) -> bool:
    """One file by two names (the same name, a symbolic link or a hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
