"""Time of a plain SmolLM2 training step under glibc's default allocator settings, scripts/env.sh's, and jemalloc.

    bash scripts/run.sh python -m benchmarks.bench_malloc --rounds 2 --steps 4        (studies/malloc/README.md)
    bash scripts/run.sh python -m benchmarks.bench_malloc --rounds 2 --steps 30 --min-seq 48  (varying batch lengths)

glibc returns a freed block above its mmap threshold (128 KB, rising to at most 32 MB as it adapts) to the OS at once,
so the next allocation of that size faults every page in again; a training step frees and reallocates its activations
and the LM head's logits (batch x sequence x 49,152 floats) every step. scripts/env.sh sets MALLOC_MMAP_THRESHOLD_ and
MALLOC_TRIM_THRESHOLD_ so that freed memory stays in the heap for the next step. Each arm runs in a child process of
its own (glibc reads these variables at start-up), arms interleaved round by round so that drift hits them alike:
`default` (both variables removed), `glibc kept` (both as scripts/env.sh sets them) and, where a jemalloc library is
installed (Debian's libjemalloc2), `jemalloc` (preloaded, glibc's variables removed)
and `jemalloc kept` (the same, never handing freed pages back: JEMALLOC_KEPT).
With --min-seq, each step's sequence length is drawn (seeded, the same in every arm) between it and --seq, as the
lengths of real batches vary (whether glibc's kept heap fragments under them and slows was a hypothesis the real
training did not bear out, studies/malloc/README.md). Short runs only: 12-16 steps of a plain model do not reproduce the
slowdown of ours' 137-step phases (studies/malloc/README.md). Per arm: the median wall time of a step (forward, loss,
backward, clip, Adam; one untimed warm-up step), the median of the last quarter of steps, the minor page faults per
step, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.machine import cpu_name

ROOT = Path(__file__).resolve().parents[1]
VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
SYSTEM_JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
JEMALLOC_KEPT = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


def env_sh_values() -> dict[str, str]:
    """The two variables as scripts/env.sh exports them (its defaults, read from a clean shell)."""
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    out = subprocess.run(["bash", "-c", f". {ROOT / 'scripts' / 'env.sh'} && env"], env=clean, capture_output=True,
                         text=True, check=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if line.split("=", 1)[0] in VARIABLES)
    if set(values) != set(VARIABLES):
        raise SystemExit(f"scripts/env.sh does not set {', '.join(sorted(set(VARIABLES) - set(values)))}")
    return values


def run_arms(cmd: list[str], arms: dict[str, dict[str, str]], rounds: int) -> dict[str, list[dict]]:
    """Run `cmd` once per arm (its environment) per round, arms interleaved so that drift hits them alike; each
    child prints its result as JSON on its last line."""
    results: dict[str, list[dict]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, env in arms.items():
            out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)  # cmd: a module of the project
            if out.returncode:
                raise SystemExit(f"arm {name} failed:\n{out.stderr[-2000:]}")
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results


def plain_step(model, opt, amp, ids) -> float:
    """One plain LM step (forward, loss, backward, clip, Adam) on `ids` as its own labels; the loss."""
    import torch

    with torch.autocast("cpu", dtype=amp, enabled=amp is not None):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def child(steps: int, batch: int, seq: int, min_seq: int) -> None:
    import random

    import torch

    from mwpgen.device import autocast_dtype
    from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer

    torch.manual_seed(0)
    device = torch.device("cpu")
    model, _ = load_model_and_tokenizer(DEFAULT_MODEL, DEFAULT_MODEL_CACHE, device=device)
    model.train()
    amp = autocast_dtype(device, mixed_precision=True)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    ids_all = torch.randint(0, model.config.vocab_size, (batch, seq))
    lengths = random.Random(0)

    def step() -> None:
        plain_step(model, opt, amp, ids_all[:, :lengths.randint(min_seq, seq)] if min_seq else ids_all)

    step()  # warm-up: Adam state, first allocations
    times, faults = [], []
    for _ in range(steps):
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    print(json.dumps({"step_s": times, "minor_faults": faults,
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--rounds", type=int, default=2, help="child processes per arm, interleaved")
    cli.add_argument("--steps", type=int, default=4, help="timed steps per child")
    cli.add_argument("--batch", type=int, default=8)
    cli.add_argument("--seq", type=int, default=128)
    cli.add_argument("--min-seq", type=int, default=0, help="if set, each step's length is drawn in [min-seq, seq]")
    cli.add_argument("--arms", nargs="+", help="only these arms (default: every arm this machine can run)")
    cli.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = cli.parse_args()
    if args.child:
        child(args.steps, args.batch, args.seq, args.min_seq)
        return
    base = {k: v for k, v in os.environ.items() if k not in VARIABLES and k not in ("LD_PRELOAD", "MALLOC_CONF")}
    arms = {"default": base, "glibc kept": {**base, **env_sh_values()}}
    if SYSTEM_JEMALLOC.is_file():
        arms["jemalloc"] = {**base, "LD_PRELOAD": str(SYSTEM_JEMALLOC)}
        # Freed pages kept, never handed back: no page faults, as glibc kept, but size classes instead of one heap.
        arms["jemalloc kept"] = {**base, "LD_PRELOAD": str(SYSTEM_JEMALLOC), "MALLOC_CONF": JEMALLOC_KEPT}
    if args.arms:
        unknown = set(args.arms) - set(arms)
        if unknown:
            raise SystemExit(f"--arms: no arm {', '.join(sorted(unknown))} here (arms: {', '.join(arms)})")
        arms = {name: env for name, env in arms.items() if name in args.arms}
    cmd = [sys.executable, "-m", "benchmarks.bench_malloc", "--child", "--steps", str(args.steps),
           "--batch", str(args.batch), "--seq", str(args.seq), "--min-seq", str(args.min_seq)]
    results = run_arms(cmd, arms, args.rounds)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shape = f"{args.min_seq}-{args.seq}" if args.min_seq else str(args.seq)
    print(f"plain SmolLM2 step, batch {args.batch} x {shape} tokens, bf16 autocast where the CPU has it; "
          f"{args.rounds} processes x {args.steps} timed steps per arm, interleaved")
    base_t = None
    for name, runs in results.items():
        t = statistics.median(s for r in runs for s in r["step_s"])
        late = statistics.median(s for r in runs for s in r["step_s"][-max(1, args.steps // 4):])
        f = statistics.median(x for r in runs for x in r["minor_faults"])
        rss = max(r["peak_rss_gib"] for r in runs)
        base_t = base_t or t
        print(f"  {name:10s} median {t:6.2f} s/step (x{t / base_t:.2f}), last quarter {late:6.2f}  "
              f"{f:9.0f} minor faults/step  peak RSS {rss:.2f} GiB")


if __name__ == "__main__":
    main()
