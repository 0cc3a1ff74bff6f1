"""The served model under load: `--calls` concurrent valid calls on loopback against `mlflow models serve` (or, with
`--server mwpgen`, `python -m tracking.serve`), counted
by status (200, or an immediate 503 past the admission bound; any other is a failure), their latencies (p50, p95,
max per status), then how long /ping and one more call take right after.

    bash scripts/run.sh python -m benchmarks.bench_served_load --model models:/mwpgen-ours@arithmetic-fold0 \
        --calls 50 --out benchmarks/results/served_load.json
    ... --server mwpgen --out benchmarks/results/served_load_mwpgen.json

The model is served as README's "Serve it" does (`--env-manager local`, one worker); the calls ask what the README's
curl asks (`verify` 8 by default). Nothing leaves the machine: the server listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.machine import describe
from orchestration.local_server import ServerNotServing, free_port, stop_group, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent
# each on loopback: `mlflow models serve` as it was measured (one worker, its default), and mwpgen's own server
SERVERS = {"mlflow": ("mlflow", "models", "serve", "--env-manager", "local", "-h", "127.0.0.1"),
           "mwpgen": ("tracking.serve", "-H", "127.0.0.1")}


def post(url: str, body: bytes, timeout_s: float) -> tuple[int, float]:
    start = time.perf_counter()
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        e.read()
        status = e.code
    except OSError:
        status = 0  # no answer within the timeout, or the connection dropped
    return status, time.perf_counter() - start


def quantile(values: list[float], q: float) -> float | None:
    values = sorted(values)
    return round(values[int(q * (len(values) - 1))], 3) if values else None


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--model", default="models:/mwpgen-ours@arithmetic-fold0")
    cli.add_argument("--server", choices=sorted(SERVERS), default="mlflow", help="which server serves the model")
    cli.add_argument("--calls", type=int, default=50)
    cli.add_argument("--verify", type=int, default=8)
    cli.add_argument("--timeout", type=float, default=120.0, help="a client's wait for one answer (s)")
    cli.add_argument("--out", type=Path)
    args = cli.parse_args()
    port = free_port()
    log = open(os.devnull, "w")
    server = subprocess.Popen([sys.executable, "-m", *SERVERS[args.server], "-m", args.model, "-p", str(port)],
                              cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            started_s = wait_until_serving(f"{base}/ping", server, 600, what=" ".join(SERVERS[args.server]))
        except ServerNotServing as e:
            raise SystemExit(str(e)) from None
        body = json.dumps({"dataframe_records": [{"equation": "x = 12 - 5", "context": "apples basket", "n": 1,
                                                  "verify": args.verify}]}).encode()
        with ThreadPoolExecutor(args.calls) as pool:
            results = list(pool.map(lambda _: post(f"{base}/invocations", body, args.timeout), range(args.calls)))
        ping_start = time.perf_counter()
        urllib.request.urlopen(f"{base}/ping", timeout=10).read()
        ping_s = time.perf_counter() - ping_start
        after = post(f"{base}/invocations", body, args.timeout)
    finally:
        stop_group(server)
    by_status: dict[str, dict] = {}
    for status in sorted({s for s, _ in results}):
        times = [t for s, t in results if s == status]
        by_status[str(status)] = {"calls": len(times), "p50_s": quantile(times, 0.5), "p95_s": quantile(times, 0.95),
                                  "max_s": round(max(times), 3)}
    result = {"machine": describe(), "server": " ".join(SERVERS[args.server]), "model": args.model, "calls": args.calls,
              "verify": args.verify,
              "server_start_s": round(started_s, 1), "by_status": by_status,
              "ping_after_s": round(ping_s, 4), "call_after": {"status": after[0], "s": round(after[1], 3)}}
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
