"""One Prefect API for a whole run: every stage process `dvc repro` starts reaches it instead of starting its own.

A Prefect flow run alone (`python -m flows.split`) with no PREFECT_API_URL starts a temporary server of its own
(several seconds on a 2-core CPU) and stops it when it exits. `shared_api()` gives a run one API: the server named by
PREFECT_API_URL when it is set (a server the caller runs: the fold workers' one, a team's), else a `prefect server`
started here on a free loopback port and stopped when the run ends, failed or interrupted. While inside, the
environment (which `dvc repro` passes on to every stage) and this process's own Prefect settings name it.

Nothing here imports Prefect at module level: a process that only checks or starts a server does not pay for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestration.local_server import ServerNotServing, answers, free_port, wait_until_serving

API_ENV = "PREFECT_API_URL"
ROOT = Path(__file__).resolve().parent.parent
# This clone's shared server, for plain `dvc repro` (`serve`); the stages read it (flows.common.SHARED_API_FILE).
SHARED_API_FILE = ROOT / ".prefect" / "api-url"


class PrefectServerError(RuntimeError):
    pass


def health_url(api_url: str) -> str:
    return f"{api_url.rstrip('/')}/health"


def is_serving(api_url: str, timeout_s: float = 2.0) -> bool:
    """Whether a Prefect API answers its health check at `api_url` (`http://host:port/api`)."""
    return answers(health_url(api_url), timeout_s)


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM when the process that started it dies, even by SIGKILL (no orphan server)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # best effort: without it, only a clean exit stops the server
        pass


def flush_to_api(timeout_s: float = 10) -> None:
    """Send what this process's Prefect still holds for the API (its log and event queues) now, while the server
    answers; Prefect would otherwise send it at interpreter exit, after the server stopped."""
    for module, name in (("prefect.logging.handlers", "APILogWorker"), ("prefect.events.worker", "EventsWorker")):
        worker = getattr(sys.modules.get(module), name, None)
        if worker is not None:
            try:
                worker.drain_all(timeout=timeout_s, at_exit=False)
            except Exception:  # a flush that fails must not hide why the run ended
                pass


def stop_process(process: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not ended after `timeout_s`."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def prefect_server(home: Path | None = None, *, log: Path | None = None, env: dict[str, str] | None = None,
                   ui: bool = True, timeout_s: float = 120) -> Iterator[str]:
    """`prefect server start` on a free loopback port; yields its API URL once it answers; stops it on exit.

    `home` is its PREFECT_HOME (its database; default: PREFECT_HOME, else Prefect's ~/.prefect), `log` where its
    output goes (default `home`/server.log). It runs in a session of its own, so a Ctrl-C at the terminal reaches
    the run (which then stops it here, after its stages have ended) rather than the server first."""
    env = dict(os.environ if env is None else env)
    home = Path(home or env.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "server.log"
    env.pop(API_ENV, None)  # a server is not a client of another API
    env.update({"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                "PREFECT_SERVER_LOGGING_LEVEL": env.get("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")})
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--ui" if ui else "--no-ui"]
    with open(log, "w") as out:
        for attempt in range(3):  # the free port can be taken before the server binds it: another port then
            port = free_port()
            api_url = f"http://127.0.0.1:{port}/api"
            server = subprocess.Popen([*cmd, "--port", str(port)], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=die_with_parent if sys.platform == "linux" else None)
            try:
                wait_until_serving(health_url(api_url), server, timeout_s, log=log, what="the Prefect server")
                break
            except ServerNotServing as e:
                stop_process(server)
                if not (server.returncode not in (None, 0) and attempt < 2
                        and "address already in use" in log.read_text(errors="replace").lower()):
                    raise PrefectServerError(str(e)) from None
            except BaseException:
                stop_process(server)
                raise
        try:
            yield api_url
        finally:
            flush_to_api()
            stop_process(server)


def point_prefect_at(api_url: str | None) -> None:
    """PREFECT_API_URL := `api_url` (None: unset) in the environment, which subprocesses inherit, and in this
    process's Prefect settings if Prefect is already imported (it reads the environment once, at import)."""
    if api_url is None:
        os.environ.pop(API_ENV, None)
    else:
        os.environ[API_ENV] = api_url
    if "prefect.context" in sys.modules:
        sys.modules["prefect.context"].refresh_global_settings_context()


def api_env() -> dict[str, str]:
    """{PREFECT_API_URL: url} for a subprocess's environment: the API this process's Prefect uses (from the
    environment or a Prefect profile), so the stages a flow run starts report to the same server; {} when none is
    set (each stage would then start a temporary server of its own)."""
    if os.environ.get(API_ENV):
        return {API_ENV: os.environ[API_ENV]}
    if "prefect" not in sys.modules:
        return {}
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return {API_ENV: url} if url else {}


@contextmanager
def pointed_server(home: Path | None = None, ui: bool = True) -> Iterator[str]:
    """`prefect_server`, with PREFECT_API_URL naming it while inside (environment, which subprocesses inherit, and
    this process's Prefect settings); the API named before is named again on the way out."""
    previous = os.environ.get(API_ENV)
    with prefect_server(home, ui=ui) as url:
        point_prefect_at(url)
        try:
            yield url
        finally:
            point_prefect_at(previous)


def sigint_at_default() -> None:
    """A child's preexec_fn: SIGINT back to its default before the child execs. A process started in the background
    by a script (`nohup ... &`, a worker) inherits SIGINT ignored and passes that on: its children could then not be
    interrupted as by a Ctrl-C, and a Prefect worker (its CLI turns SIGTERM into SIGINT) not even stopped."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigterm_as_exit(signum, frame) -> None:
    raise SystemExit(128 + signum)


def shared_api_url(file: Path = SHARED_API_FILE) -> str | None:
    """The URL of this clone's shared server (`serve`) when it answers; None otherwise."""
    try:
        url = file.read_text().strip()
    except OSError:
        return None
    return url if url and is_serving(url, timeout_s=1) else None


@contextmanager
def shared_api(home: Path | None = None, ui: bool = True) -> Iterator[str]:
    """The Prefect API a whole run uses, named by PREFECT_API_URL while inside (environment and this process's
    settings). PREFECT_API_URL already set: that server, which must answer. Otherwise a server started here
    (`prefect_server`), stopped on the way out -- also after a failure, a Ctrl-C or a SIGTERM."""
    existing = os.environ.get(API_ENV)
    if existing:
        if not is_serving(existing, timeout_s=10):
            raise PrefectServerError(f"{API_ENV}={existing} does not answer (its /health); start that server, or "
                                     f"unset {API_ENV} to have this run start one of its own")
        yield existing
        return
    if served := shared_api_url():  # this clone's shared server (`serve`)
        point_prefect_at(served)
        try:
            yield served
        finally:
            point_prefect_at(None)
        return
    main_thread = threading.current_thread() is threading.main_thread()  # signal handlers: main thread only
    previous = signal.signal(signal.SIGTERM, _sigterm_as_exit) if main_thread else None
    try:
        with pointed_server(home, ui=ui) as url:
            yield url
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def serve(file: Path = SHARED_API_FILE, home: Path | None = None) -> None:
    """A Prefect server for this clone until interrupted: its URL in `file`, so that the stages of a plain `dvc repro`
    (flows.common.use_shared_prefect_api) and the pipeline use it instead of each starting a server of its own."""
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        signal.signal(signal.SIGTERM, _sigterm_as_exit)
    with prefect_server(home) as url:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(url + "\n")
        try:
            print(f"Prefect API for this clone: {url} (UI: {url.removesuffix('/api')}); plain `dvc repro` and "
                  "the pipeline use it while this runs; Ctrl-C stops it", flush=True)
            while True:
                time.sleep(3600)
        finally:
            file.unlink(missing_ok=True)


def main() -> None:
    import argparse

    cli = argparse.ArgumentParser(description="python -m orchestration.prefect_api serve: " + (serve.__doc__ or ""))
    cli.add_argument("command", choices=["serve"])
    cli.add_argument("--file", type=Path, default=SHARED_API_FILE, help=argparse.SUPPRESS)
    args = cli.parse_args()
    try:
        serve(args.file)
    except KeyboardInterrupt:
        pass
    except PrefectServerError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
