"""The training loop of "ours": phase 1 then phase 2 (steps.py), resumable from its last checkpoint.

The whole run is one sequence of global steps: phase 1 takes steps [0, S1), phase 2 [S1, S1 + S2). Step g's
batch is a pure function of (seed, phase, epoch, position), so the data position is just g. Every
`save_every` steps the state is written atomically to `state_dir/state.pt`: model, selector and optimizer
states, the LR schedulers, g, the loss history and the torch / Python / CUDA RNG states (Bernoulli context
samples, Gumbel noise, dropout and context permutation all draw from the global torch RNG). A killed run
restarts from that file and, on the same device, ends bit-for-bit where an uninterrupted run would
(tests/test_train_joint.py). The file carries a fingerprint of everything that shapes the run; a state written
by a different configuration or data is refused by name, never silently resumed.

Paper (supplementary "Training Details"): Adam, lr 5e-5, constant (no schedule is mentioned); the schedulers
here are constant and exist so that a schedule change cannot silently break resumption.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from mwpgen import resume
from mwpgen.resume import STATE_FILE
from mwpgen.ours.selection import context_lm_loss
from mwpgen.ours.steps import JointConfig, JointExample, JointModels, encode_joint, make_optimizers, mwp2eq_step, phase1_step, \
    phase2_step



@dataclass(frozen=True)
class Schedule:
    phase1_epochs: int = 1
    phase1_max_steps: int = 0  # 0 = no cap
    phase2_epochs: int = 1
    phase2_max_steps: int = 0
    batch_size: int = 8
    lr: float = 5e-5
    selector_lr: float | None = None  # None: lr
    seed: int = 0
    mwp2eq_in_phase1: bool = True  # mwp2eq learns its own objective beside phase 1 (see steps.py)
    save_every: int = 10
    log_every: int = 10
    eval_every: int = 0  # steps between validation measurements (0: at each phase's end only)
    patience: int = 0  # measurements without a new best before a phase stops early (0: never)
    threshold: float = 0.5  # the selector's inference threshold, for the validation context

    def phase_steps(self, n_examples: int) -> tuple[int, int]:
        per_epoch = math.ceil(n_examples / self.batch_size)
        cap = lambda epochs, max_steps: min(epochs * per_epoch, max_steps) if max_steps else epochs * per_epoch  # noqa: E731
        return cap(self.phase1_epochs, self.phase1_max_steps), cap(self.phase2_epochs, self.phase2_max_steps)


def run_fingerprint(config: JointConfig, schedule: Schedule, examples: Sequence[JointExample], extra: dict) -> str:
    """What shapes the run: a state is resumed only by the run that wrote it."""
    return resume.fingerprint(config={k: str(v) for k, v in vars(config).items()}, schedule=vars(schedule),
                              data=[(e.equation, e.problem, list(e.keywords)) for e in examples], extra=extra)


def _batch_indices(n: int, batch_size: int, seed: int, phase: int, epoch: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed * 1_000_003 + phase * 1_009 + epoch)
    order = torch.randperm(n, generator=g).tolist()
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def _position(step: int, s1: int, n: int, batch_size: int) -> tuple[int, int, int]:
    """(phase, epoch, batch index) of global step `step`."""
    per_epoch = math.ceil(n / batch_size)
    phase, local = (1, step) if step < s1 else (2, step - s1)
    return phase, local // per_epoch, local % per_epoch


def _modules(models: JointModels) -> dict[str, torch.nn.Module]:
    out = {"generator": models.generator}
    if models.mwp2eq is not None:
        out["mwp2eq"] = models.mwp2eq
    if models.selector is not None:
        out["selector"] = models.selector
    return out


def save_state(path: Path, models: JointModels, optimizers: dict, schedulers: dict, step: int, history: list,
               fp: str, best: dict | None = None) -> None:
    resume.save(path, fp, {"step": step, "history": history, "best": best,
                           "models": {k: m.state_dict() for k, m in _modules(models).items()},
                           "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
                           "schedulers": {k: s.state_dict() for k, s in schedulers.items()}})


def load_state(path: Path, models: JointModels, optimizers: dict, schedulers: dict,
               fp: str) -> tuple[int, list, dict | None]:
    state = resume.load(path, fp)
    for k, m in _modules(models).items():
        m.load_state_dict(state["models"][k])
    for k, o in optimizers.items():
        o.load_state_dict(state["optimizers"][k])
    for k, s in schedulers.items():
        s.load_state_dict(state["schedulers"][k])
    return state["step"], state["history"], state.get("best")


def train_joint(
    models: JointModels,
    examples: Sequence[JointExample] | Callable[[int, int], Sequence[JointExample]],
    config: JointConfig,
    schedule: Schedule,
    *,
    state_dir: Path | None = None,
    fingerprint_extra: dict | None = None,
    on_log: Callable[[dict], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    validation: Sequence[JointExample] = (),
) -> dict:
    """Run phase 1 then phase 2. `examples` is a list or `(phase, epoch) -> list` (fresh keyword dropout per
    epoch, reproducible). Resumes from `state_dir/state.pt` when it exists. `on_step(g)` is called after global
    step g (1-based) and its checkpoint; the tests raise from it to simulate a kill.
    With `validation` problems, the generator's loss on them with the context the selector picks (or their
    keywords) is measured every `schedule.eval_every` steps and at each phase's end; each phase ends with its
    best weights, and stops early after `schedule.patience` measurements without a new best.
    Returns {"history": per-step loss dicts, "val": [{step, phase, val_loss}], "best_steps": {phase: step},
    "steps": (S1, S2) scheduled, "steps_run": the steps each phase ran (fewer after an early stop), "wall_time_s",
    "resumed_from"}."""
    get = examples if callable(examples) else (lambda _p, _e: examples)
    n = len(get(1, 0))
    s1, s2 = schedule.phase_steps(n)
    fp = run_fingerprint(config, schedule, get(1, 0), fingerprint_extra or {})
    torch.manual_seed(schedule.seed)
    random.seed(schedule.seed)
    optimizers = make_optimizers(models, lr=schedule.lr, selector_lr=schedule.selector_lr)
    schedulers = {k: torch.optim.lr_scheduler.LambdaLR(o, lambda _s: 1.0) for k, o in optimizers.items()}
    step, history, resumed_from = 0, [], 0
    best = _no_best()
    state_path = Path(state_dir) / STATE_FILE if state_dir is not None else None
    if state_path is not None and state_path.exists():
        step, history, saved_best = load_state(state_path, models, optimizers, schedulers, fp)
        best = saved_best or best
        resumed_from = step
        print(f"resuming from {state_path} at step {step}/{s1 + s2}", flush=True)

    t0 = time.perf_counter()
    encoded_epoch: dict[tuple[int, int], list] = {}
    while step < s1 + s2:
        phase, epoch, index = _position(step, s1, n, schedule.batch_size)
        if (phase, epoch) not in encoded_epoch:
            encoded_epoch = {(phase, epoch): [encode_joint(models.tokenizer, ex, config.max_problem_tokens)
                                              for ex in get(phase, epoch)]}
        encoded = encoded_epoch[(phase, epoch)]
        idx = _batch_indices(n, schedule.batch_size, schedule.seed, phase, epoch)[index]
        batch = [encoded[i] for i in idx]
        t_step = time.perf_counter()
        if models.selector is not None:
            models.selector.requires_grad_(phase == 1)  # phase 2: the selector is frozen
        if phase == 1:
            losses = phase1_step(models, batch, optimizers, config)
            if schedule.mwp2eq_in_phase1 and models.mwp2eq is not None:
                losses |= mwp2eq_step(models, batch, optimizers, config)
        else:
            losses = phase2_step(models, batch, optimizers, config)
        for s in schedulers.values():
            s.step()
        step += 1
        history.append({"step": step, "phase": phase, "epoch": epoch, "step_s": time.perf_counter() - t_step,
                        **losses})
        if validation and ((schedule.eval_every and step % schedule.eval_every == 0) or step in (s1, s1 + s2)):
            if _measure(models, validation, config, schedule, best, step, phase) and step not in (s1, s1 + s2):
                print(f"phase {phase}: no better validation loss in {schedule.patience} measurements; "
                      f"stopping it at step {step}", flush=True)
                history[-1]["stopped_phase"] = phase
                step = s1 if phase == 1 else s1 + s2
            if step in (s1, s1 + s2):  # the phase's end: its best weights go on
                _restore(models, best)
                best = _no_best(best)
        if state_path is not None and step < s1 + s2 and (step % schedule.save_every == 0 or step == s1):
            save_state(state_path, models, optimizers, schedulers, step, history, fp, best)
        if step % schedule.log_every == 0 or step in (s1, s1 + s2):
            window = [h for h in history[-schedule.log_every:] if h["phase"] == phase]
            record = {"step": step, "phase": phase, "epoch": epoch}
            for key in sorted({k for h in window for k in h} - {"step", "phase", "epoch"}):
                vals = [h[key] for h in window if key in h]
                record[key] = sum(vals) / len(vals)
            print(f"step {step}/{s1 + s2} phase {phase} " + " ".join(
                f"{k} {v:.4f}" for k, v in record.items() if k not in ("step", "phase", "epoch")), flush=True)
            if on_log is not None:
                on_log(record)
        if on_step is not None:
            on_step(step)
    for m in _modules(models).values():
        m.eval()
    steps_run = tuple(sum(h["phase"] == p for h in history) for p in (1, 2))
    return {"history": history, "val": best["val"], "best_steps": best["best_steps"], "steps": (s1, s2),
            "steps_run": steps_run, "wall_time_s": time.perf_counter() - t0, "resumed_from": resumed_from}


def _no_best(previous: dict | None = None) -> dict:
    """The best-so-far record of a phase; `val` and `best_steps` carry over from earlier phases."""
    return {"loss": math.inf, "step": 0, "bad": 0, "weights": None,
            "val": previous["val"] if previous else [], "best_steps": previous["best_steps"] if previous else {}}


def _measure(models: JointModels, validation, config: JointConfig, schedule: Schedule, best: dict, step: int,
             phase: int) -> bool:
    """Validation loss now; keep the best weights of this phase. True when the phase's patience has run out."""
    loss = context_lm_loss(models, validation, config, schedule.threshold)
    best["val"].append({"step": step, "phase": phase, "val_loss": loss})
    if loss < best["loss"]:
        best.update(loss=loss, step=step, bad=0, weights={
            name: resume.snapshot(m) for name, m in _modules(models).items()})
        best["best_steps"][phase] = step
    else:
        best["bad"] += 1
    print(f"step {step} phase {phase}: validation loss {loss:.4f} (best {best['loss']:.4f} at step {best['step']})",
          flush=True)
    return schedule.patience > 0 and best["bad"] >= schedule.patience


def _restore(models: JointModels, best: dict) -> None:
    if best["weights"] is not None:
        for name, m in _modules(models).items():
            m.load_state_dict(best["weights"][name])


LOSS_KEYS = ("lm", "eq", "kl", "mwp2eq", "selected_frac")


def phase_summary(history: Sequence[dict], phase: int, steps_per_epoch: int, window: int) -> dict:
    """One phase of a run's history: mean step time, minutes per epoch (from the mean step time), and each loss
    averaged over the last `window` steps (the training-log window). {} if the phase did not run."""
    hs = [h for h in history if h["phase"] == phase]
    if not hs:
        return {}
    step_s = sum(h["step_s"] for h in hs) / len(hs)
    out = {"steps": len(hs), "step_s": step_s, "min_per_epoch": step_s * steps_per_epoch / 60}
    tail = hs[-min(len(hs), window):]
    for key in LOSS_KEYS:
        vals = [h[key] for h in tail if key in h]
        if vals:
            out[key] = sum(vals) / len(vals)
    return out
