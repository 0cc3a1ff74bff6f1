"""A warm Python for a run's stages: Prefect, MLflow, torch, transformers and spaCy imported once, each stage a fork.

A stage process spends most of its fixed cost importing what every stage imports: in a smoke run the stage
processes spent 191.7 s importing (MLflow 60.4, transformers 46.5, Prefect 34.9, torch 31.7, spaCy 11.3;
docs/stage_overhead.md). While `warm_stages()` is entered, a server process (this module) imports them once and
listens on a Unix socket, and a `python` that the stage commands find first on their PATH
(orchestration/warm_python_client.py) asks it to fork a process that runs `python -m flows.<stage> ...` there, with
the stage's stdin, stdout, stderr, directory, environment and arguments. The stage's own code -- flows/, tasks/,
tracking/, mwpgen/ -- is never imported before the fork: every stage runs the files DVC hashed for it, as read at its
start.

A stage runs in a Python of its own, as before (the client execs the real one with the same arguments), whenever the
server cannot serve it exactly: it is not running or still importing, the command is not `python -m flows.*`, or the
stage's environment differs from the one the server imported under in anything a preloaded module may have read
(only the variables listed in `read_per_stage` may differ). Each forked stage process is the leader of a process
group of its own; the client passes on the signals it gets to that group and ends as the stage ended, and a stage
whose client dies is killed with its group, so `dvc repro`, interruptions and the pipeline's timeouts see what they
see of a stage in a process of its own.

Fork safety: the server holds no Python thread (it refuses to serve if an import started one) and runs no torch,
OpenMP or tokenizer work before it forks; the native threads OpenBLAS (numpy's, scipy's) and jemalloc start at
import are theirs to handle around a fork (both register pthread_atfork handlers). tests/test_warm_python.py runs an
OpenMP matrix product in a forked stage.

    python -m orchestration.warm_python SOCKET   # the server; `warm_stages()` starts and stops it
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from orchestration import warm_python_client
from orchestration.prefect_api import API_ENV, die_with_parent, stop_process

SOCKET_ENV = warm_python_client.SOCKET_ENV
ROOT = Path(__file__).resolve().parent.parent
# What stage processes import before their work (the smoke run's import profile; MLflow's sqlite store is 1.8 s of
# every stage's MLflow run): modules only, never a model, a tokenizer or a spaCy pipeline (files DVC tracks).
PRELOAD = ("mlflow", "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.model_registry.sqlalchemy_store",
           "sqlalchemy.dialects.sqlite", "prefect", "prefect.flows", "prefect.flow_engine", "prefect.transactions",
           "prefect.cache_policies", "tabulate", "torch", "safetensors.torch", "transformers",
           "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
           "transformers.models.llama.modeling_llama", "transformers.models.gpt2.tokenization_gpt2",
           "transformers.generation", "spacy", "spacy.lang.en", "pandas")
SERVED_MODULES = "flows."  # `python -m flows.<stage>`: the commands of dvc.yaml


def read_per_stage(name: str) -> bool:
    """Environment variables that may differ between the server and a stage it runs: the project's own (read by
    stage code, which is imported after the fork), DVC's and the shell's per-command ones, and the Prefect API
    (Prefect's settings are read again in the stage process)."""
    return name.startswith(("MWPGEN_", "DVC_")) or name in {"PWD", "OLDPWD", "SHLVL", "_", API_ENV}


def why_cold(args: list[str], env: Mapping[str, str], imported_under: Mapping[str, str]) -> str | None:
    """Why a request must run in a Python of its own; None when it may be forked from the server."""
    if len(args) < 2 or args[0] != "-m" or not args[1].startswith(SERVED_MODULES):
        return f"not a `python -m {SERVED_MODULES}*` command: {' '.join(args[:2])}"
    differ = sorted(k for k in set(env) | set(imported_under)
                    if env.get(k) != imported_under.get(k) and not read_per_stage(k))
    if differ:
        return f"its environment differs from the warm Python's in {', '.join(differ)}"
    return None


def exit_code(e: SystemExit) -> int:
    """The status Python exits with for an uncaught SystemExit (printing a non-integer code, as Python does)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def run_as_main(module: str) -> None:
    """`python -m module` from here to the process's end, as Python ends it: non-daemon threads joined, exit
    handlers run, streams flushed; then the exit status (or SIGINT after an uncaught KeyboardInterrupt)."""
    import atexit
    import runpy

    interrupted = False
    try:
        runpy._run_module_as_main(module, alter_argv=True)  # what `python -m` itself calls
        code = 0
    except SystemExit as e:
        code = exit_code(e)
    except KeyboardInterrupt:
        interrupted, code = True, 130
        sys.excepthook(*sys.exc_info())
    except BaseException:  # noqa: BLE001 -- shown as Python shows an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _stage_process(request: dict, fds: list[int], go: int) -> None:  # pragma: no cover - a forked child
    """In the forked child: become the stage process once the monitor says go, then run it."""
    os.setpgid(0, 0)
    if os.read(go, 1) != b"g":  # the monitor died before the client learned this pid: nothing may run unseen
        os._exit(1)
    os.close(go)  # from here the client knows this pid (and can signal its group) before any stage code runs
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: dies with its monitor
    except Exception:  # noqa: BLE001 -- best effort; the monitor also kills the group when its client goes
        pass
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if "prefect.context" in sys.modules:  # Prefect read its settings from the environment at import
        sys.modules["prefect.context"].refresh_global_settings_context()
    if "numpy" in sys.modules:  # a fresh process seeds numpy's global generator from the OS, not from its parent's
        sys.modules["numpy"].random.seed()
    args = request["args"]
    sys.argv = ["-m", *args[2:]]
    sys.path[0] = request["cwd"]
    run_as_main(args[1])


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    header, fds, _, _ = socket.recv_fds(conn, 4, 3)
    if len(header) < 4:
        header += conn.recv(4 - len(header), socket.MSG_WAITALL)
    size, = struct.unpack("!I", header)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise OSError("the client went away mid-request")
        body += chunk
    return json.loads(body), fds


def _wait(pid: int, conn: socket.socket) -> tuple[str, float]:
    """The stage's end as the client reports it, and the CPU seconds it (and the children it waited for) used. If the
    client goes first, the stage's group is killed."""
    process = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([process, conn], [], [])
        if process in ready:
            break
        if not conn.recv(1):  # the client is gone (killed): so is the stage, with what it started
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
    _, status, usage = os.wait4(pid, 0)
    if os.WIFSIGNALED(status):
        ending = f"signal {os.WTERMSIG(status)}\n"
    else:
        ending = f"exit {os.waitstatus_to_exitcode(status)}\n"
    return ending, usage.ru_utime + usage.ru_stime


def cpu_file(socket_path: str) -> Path:
    """Where the server notes the CPU time of each stage it ran: a stage forked here is no descendant of the `dvc
    repro` that ran it, so that process's rusage no longer includes the stage's."""
    return Path(socket_path).with_name("stage_cpu.tsv")


def forked_cpu_seconds() -> dict[str, float]:
    """DVC stage name -> CPU seconds of its processes forked from this run's warm Python ({} without one)."""
    path = os.environ.get(SOCKET_ENV)
    if not path or not cpu_file(path).exists():
        return {}
    seconds: dict[str, float] = {}
    for line in cpu_file(path).read_text().splitlines():
        stage, cpu = line.rsplit("\t", 1)
        seconds[stage] = seconds.get(stage, 0.0) + float(cpu)
    return seconds


def _monitor(conn: socket.socket, imported_under: Mapping[str, str], cpu_log: Path) -> None:  # pragma: no cover
    """One request, in a child of the server: refuse it or fork the stage process and report how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        request, fds = _receive(conn)
        why = why_cold(request["args"], request["env"], imported_under)
        if why is not None:
            print(f"warm python: {why}; it runs in a Python of its own", file=sys.stderr, flush=True)
            conn.sendall(b"cold\n")
            return
        go_read, go_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.close(go_write)
            _stage_process(request, fds, go_read)
        os.close(go_read)
        for fd in fds:
            os.close(fd)
        try:
            os.setpgid(pid, pid)
        except OSError:  # the child did it first
            pass
        conn.sendall(f"pid {pid}\n".encode())
        os.write(go_write, b"g")
        os.close(go_write)
        ending, cpu = _wait(pid, conn)
        with open(cpu_log, "a") as log:  # one short append per stage: whole lines even with stages side by side
            log.write(f"{request['env'].get('DVC_STAGE', request['args'][1])}\t{cpu:.3f}\n")
        conn.sendall(ending.encode())
    except OSError:
        pass
    finally:
        os._exit(0)


def serve(socket_path: str) -> None:
    """Import PRELOAD, then fork a monitor for every connection until the process that started this one ends."""
    imported_under = dict(os.environ)
    parent = os.getppid()
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as e:  # another version of a package: its stages import it themselves
            print(f"warm python: not preloaded: {e}", file=sys.stderr, flush=True)
    if threading.active_count() != 1:
        Path(socket_path + ".refused").touch()
        sys.exit(f"warm python: an import started a thread ({threading.enumerate()}); not serving")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)  # bound only now: until then the clients find no socket and run stages cold
    listener.listen(16)
    listener.settimeout(1.0)
    while os.getppid() == parent:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _monitor(conn, imported_under, cpu_file(socket_path))
        conn.close()


def wait_until_listening(timeout_s: float, socket_path: str | None = None) -> bool:
    """Wait until the warm Python of this run (`socket_path`, default: the one in the environment) listens, it
    refused to serve, or `timeout_s` passed; whether it listens."""
    path = socket_path or os.environ.get(SOCKET_ENV)
    if not path:
        return False
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path) and not os.path.exists(path + ".refused") and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


def client_script(python: str) -> str:
    """The `python` put first on the stages' PATH: the client, run by the real Python in isolated mode."""
    return f"#!{python} -IS\n" + Path(warm_python_client.__file__).read_text()


@contextmanager
def warm_stages(env: Mapping[str, str] | None = None, *, wait_s: float = 0) -> Iterator[dict[str, str]]:
    """While inside, a `python -m flows.<stage>` started by a subprocess of this one (`dvc repro`) forks from a warm
    Python (see above): the server is started here with `env` (default: this process's environment) and the two
    variables that reach it (PATH, with the client first, and MWPGEN_WARM_SOCKET) are set in os.environ, which
    subprocesses inherit; yields them. The server imports for some seconds; stages started before it listens run
    cold (`wait_s` here, or `wait_until_listening` later: wait for it first). Outside Linux nothing changes."""
    if sys.platform != "linux":
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="mwpgen-warm-") as scratch:
        bin_dir = Path(scratch) / "bin"
        bin_dir.mkdir()
        client = bin_dir / "python"
        client.write_text(client_script(sys.executable))
        client.chmod(0o755)
        socket_path = str(Path(scratch) / "socket")
        base = dict(os.environ if env is None else env)
        added = {"PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}", SOCKET_ENV: socket_path}
        server = subprocess.Popen([sys.executable, "-m", "orchestration.warm_python", socket_path], cwd=ROOT,
                                  env={**base, **added}, stdin=subprocess.DEVNULL, start_new_session=True,
                                  preexec_fn=die_with_parent)
        previous = {k: os.environ.get(k) for k in added}
        os.environ.update(added)
        try:
            wait_until_listening(wait_s, socket_path)
            yield added
        finally:
            for k, v in previous.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            stop_process(server, timeout_s=10)


if __name__ == "__main__":
    serve(sys.argv[1])
