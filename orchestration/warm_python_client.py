"""The `python` a stage command finds first on its PATH inside a pipeline run (orchestration/warm_python.py).

`python -m MODULE ARGS...` asks the warm Python listening at $MWPGEN_WARM_SOCKET to run MODULE in a process forked
from it, with this process's stdin, stdout, stderr, directory and environment; passes on the signals this process
gets (to that process's group, as a Ctrl-C reaches a stage and the children it started); and ends as that process
ended: its exit status, or the signal that killed it. Anything else, and whenever the warm Python does not start the
module (not running, a different environment, not a stage module): the real Python, exec'd with the same arguments,
as if this file were not there.

Standard library only: it runs as `python -I -S` (no site-packages, no environment variables read by Python itself).
"""

import json
import os
import signal
import socket
import struct
import sys

SOCKET_ENV = "MWPGEN_WARM_SOCKET"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_cold(args: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, *args])


def ask_warm(path: str, args: list[str]):
    """(process id, reply stream) once the warm Python has started the module; (None, None) when nothing started."""
    request = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        socket.send_fds(sock, [struct.pack("!I", len(request))], [0, 1, 2])
        sock.sendall(request)
        replies = sock.makefile("r")
        first = replies.readline().split()
    except OSError:
        return None, None
    if len(first) != 2 or first[0] != "pid":
        return None, None
    return int(first[1]), replies


def main(args: list[str]) -> None:
    path = os.environ.get(SOCKET_ENV)
    if not path or len(args) < 2 or args[0] != "-m":
        run_cold(args)
    pid, replies = ask_warm(path, args)
    if pid is None:
        run_cold(args)

    def forward(signum, frame):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    status = replies.readline().split()  # "exit CODE" or "signal NUMBER"; nothing if the warm Python died
    if len(status) != 2:
        sys.stderr.write(f"warm python: lost the process running {args[1]} (pid {pid})\n")
        sys.exit(1)
    what, number = status[0], int(status[1])
    if what == "signal":  # ended by a signal: so does this process, so its caller sees the same
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        number = 128 + number
    sys.exit(number)


if __name__ == "__main__":
    main(sys.argv[1:])
