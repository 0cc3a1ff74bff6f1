"""One writer at a time for an --output FILE: FILE.lock, held with an advisory lock (flock) for the whole run and
holding the writer's pid, so a second `mwpgen generate --output FILE` is refused naming the run that writes it.

flock is released by the kernel when its holder exits, however it exits, so a lock file left behind by a killed run
is taken over, never a reason to refuse."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, CliError

LOCK_SUFFIX = ".lock"


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


class OutputLock:
    """Held from `acquire` to `release`: while held, FILE.lock holds this process's pid."""

    def __init__(self, path: Path):
        self.path = lock_path(path)
        self.output = path
        self.fd: int | None = None

    def acquire(self) -> OutputLock:
        while self.fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise CliError(f"--output {self.output}: cannot create {self.path.name} beside it "
                               f"({e.strerror or e})", EXIT_BAD_INPUT) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                os.close(fd)
                raise CliError(f"--output {self.output} is being written by another mwpgen generate (pid "
                               f"{holder}, {self.path.name}); wait for it to finish, or give another file",
                               EXIT_BAD_INPUT) from None
            if _same_file(fd, self.path):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self.fd = fd
            else:  # the holder removed the lock file between our open and our flock: lock the new one
                os.close(fd)
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before the unlock: a waiter never locks a file about to vanish
        except OSError as e:
            raise CliError(f"could not remove {self.path} ({e.strerror or e})", EXIT_FAILED) from None
        finally:
            os.close(self.fd)
            self.fd = None


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
