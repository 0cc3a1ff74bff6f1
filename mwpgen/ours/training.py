"""The training loop of "ours": phase 1 then phase 2 (steps.py), resumable from its last checkpoint.

The whole run is one sequence of global steps: phase 1 takes steps [0, S1), phase 2 [S1, S1 + S2). Step g's
batch is a pure function of (seed, phase, epoch, position), so the data position is just g. Every
`save_every` steps the state is written atomically to `state_dir/state.pt`: model, selector and optimizer
states, the LR schedulers, g, the loss history and the torch / Python / CUDA RNG states (Bernoulli context
samples, Gumbel noise, dropout and context permutation all draw from the global torch RNG). A killed run
restarts from that file and, on the same device, ends bit-for-bit where an uninterrupted run would
(tests/test_train_joint.py). The file carries a fingerprint of everything that shapes the run; a state written
by a different configuration or data is refused by name, never silently resumed.

Checkpoint choice is per component, each by the validation loss of the generator with the context the selector
picks (selection.context_lm_loss): phase 1 keeps the selector of lowest loss and runs its whole schedule (a
selector's bad stretch neither stops nor resets the generator or the parser); phase 2 keeps the generator of
lowest loss, counting the one it starts from, and stops after `patience` measurements without a better one, as
GPT-pre does (mwpgen/lm/training.py). The co-trained mwp2eq is never rolled back: it only learns its own NLL on
real problems. As phase 2 starts, the moment it begins to drive L_eq, its exact parse accuracy on the validation
problems is measured and, given the evaluator's (`mwp2eq_target`), it learns on until it reaches it (parser_gate.py).

Paper (supplementary "Training Details"): Adam, lr 5e-5, constant (no schedule is mentioned); the schedulers
here are constant and exist so that a schedule change cannot silently break resumption.
"""

from __future__ import annotations

import math
import random
import time
from typing import Callable, Sequence

import torch

from mwpgen import resume
from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.training import parse_accuracy
from mwpgen.loop import Checkpoints, EarlyStopping, run_steps, seeded_batches
from mwpgen.ours.parser_gate import reach_parse_accuracy
from mwpgen.ours.selection import context_lm_loss
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.ours.steps import JointModels, make_optimizers, mwp2eq_step, phase1_step, \
    phase2_step


def phase_steps(cfg: OursTrainParams, n_examples: int) -> tuple[int, int]:
    """(S1, S2): each phase's steps, its epochs over n examples capped by its max_steps (0: no cap)."""
    per_epoch = math.ceil(n_examples / cfg.batch_size)
    cap = lambda p: min(p.epochs * per_epoch, p.max_steps) if p.max_steps else p.epochs * per_epoch  # noqa: E731
    return cap(cfg.phase1), cap(cfg.phase2)


def run_fingerprint(cfg: OursTrainParams, seed: int, examples: Sequence[JointExample], extra: dict) -> str:
    """What shapes the run: a state is resumed only by the run that wrote it."""
    return resume.fingerprint(cfg=cfg.model_dump(), seed=seed,
                              data=[(e.equation, e.problem, list(e.keywords)) for e in examples], extra=extra)


def _modules(models: JointModels) -> dict[str, torch.nn.Module]:
    out = {"generator": models.generator}
    if models.mwp2eq is not None:
        out["mwp2eq"] = models.mwp2eq
    if models.selector is not None:
        out["selector"] = models.selector
    return out


def train_joint(
    models: JointModels,
    examples: Sequence[JointExample] | Callable[[int, int], Sequence[JointExample]],
    cfg: OursTrainParams,
    *,
    seed: int,
    log_every: int,
    state_dir=None,
    fingerprint_extra: dict | None = None,
    on_log: Callable[[dict], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    validation: Sequence[JointExample] = (),
    dropout: float,
    mwp2eq_target: float | None = None,
) -> dict:
    """Run phase 1 then phase 2 with the settings of `train.ours` (`cfg`). `examples` is a list or `(phase,
    epoch) -> list` (fresh keyword dropout per epoch, reproducible). Resumes from `state_dir/state.pt` when it
    exists. `on_step(g)` is called after global step g (1-based) and its checkpoint; the tests raise from it to
    simulate a kill.
    With `validation` problems, the generator's loss on them with the context the selector picks (or their
    keywords) is measured every `cfg.eval_every` steps, at each phase's end and as phase 2 starts; the selector and
    the generator end with their best weights (module docstring). `dropout`: keyword dropout (keywords.dropout).
    `mwp2eq_target`: the evaluator's validation parse accuracy, which the co-trained mwp2eq reaches (or spends one
    more epoch trying to) before phase 2 when it drives L_eq; None: measured only.
    Returns {"history": per-step loss dicts, "val": [{step, phase, val_loss}], "best_steps": {component: step},
    "mwp2eq_val_accuracy" (None without a mwp2eq or validation), "mwp2eq_gate" (parser_gate's record, or None),
    "steps": (S1, S2) scheduled, "steps_run": the steps each phase ran (fewer after an early stop), "wall_time_s",
    "resumed_from"}."""
    get = examples if callable(examples) else (lambda _p, _e: examples)
    n = len(get(1, 0))
    s1, s2 = phase_steps(cfg, n)
    fingerprint = run_fingerprint(cfg, seed, get(1, 0), (fingerprint_extra or {}) | {"dropout": dropout, "batching": "length_grouped"})
    checkpoints = Checkpoints(state_dir, fingerprint, cfg.save_every)
    torch.manual_seed(seed)
    random.seed(seed)
    optimizers = make_optimizers(models, lr=cfg.lr, selector_lr=cfg.selector_lr or cfg.lr)
    schedulers = {k: torch.optim.lr_scheduler.LambdaLR(o, lambda _s: 1.0) for k, o in optimizers.items()}
    modules = _modules(models)
    chosen = {1: ("selector", 0), 2: ("generator", cfg.patience)}  # each phase's chosen component, its patience

    def phase_stopping(phase: int) -> EarlyStopping:
        name, patience = chosen[phase]
        return EarlyStopping({name: modules[name]} if name in modules else {}, patience)

    stopping = phase_stopping(1)
    run: dict = {"step": 0, "history": [], "val": [], "best_steps": {}, "mwp2eq_val_accuracy": None,
                 "mwp2eq_gate": None}
    state = checkpoints.load()
    if state is not None:
        for k, m in modules.items():
            m.load_state_dict(state["models"][k])
        for k, o in optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        for k, sch in schedulers.items():
            sch.load_state_dict(state["schedulers"][k])
        run = state["run"]
        stopping = phase_stopping(1 if run["step"] < s1 else 2)
        stopping.load_state_dict(state["stopping"])
        print(f"resuming from {state_dir} at step {run['step']}/{s1 + s2}", flush=True)
    resumed_from = run["step"]
    history = run["history"]

    def state_at(step: int) -> dict:
        return {"run": {**run, "step": step}, "stopping": stopping.state_dict(step),
                "models": {k: m.state_dict() for k, m in modules.items()},
                "optimizers": {k: o.state_dict() for k, o in optimizers.items()},
                "schedulers": {k: sch.state_dict() for k, sch in schedulers.items()}}

    per_epoch = math.ceil(n / cfg.batch_size)
    # The current epoch's encoded examples and its batch orders: the first is the step's batch; phase 1's co-trained
    # mwp2eq also reads the same index of the others (fresh seeded orders of the same epoch).
    epoch_data: dict[tuple[int, int], tuple[list, list]] = {}
    mwp2eq_passes = cfg.mwp2eq_batches_per_step if cfg.mwp2eq_in_phase1 and models.mwp2eq is not None else 0

    def train_step(phase: int, start: int, step: int) -> None:
        epoch, index = divmod(step - 1 - start, per_epoch)
        if (phase, epoch) not in epoch_data:
            epoch_data.clear()
            encoded = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in get(phase, epoch)]
            # Length-grouped by the generator row's varying part (the context slot has a fixed width).
            lengths = [len(e.prefix) + len(e.problem.ids) for e in encoded]
            orders = [seeded_batches(n, cfg.batch_size, seed, phase * 1_009 + epoch + 100_003 * p, lengths)
                      for p in range(max(1, mwp2eq_passes) if phase == 1 else 1)]
            epoch_data[(phase, epoch)] = (encoded, orders)
        encoded, orders = epoch_data[(phase, epoch)]
        batch = [encoded[i] for i in orders[0][index]]
        t_step = time.perf_counter()
        if models.selector is not None:
            models.selector.requires_grad_(phase == 1)  # phase 2: the selector is frozen
        if phase == 1:
            losses = phase1_step(models, batch, optimizers, cfg, dropout)
            if mwp2eq_passes:
                passes = [mwp2eq_step(models, [encoded[i] for i in order[index]], optimizers, cfg)["mwp2eq"]
                          for order in orders[:mwp2eq_passes]]
                losses["mwp2eq"] = sum(passes) / len(passes)
        else:
            losses = phase2_step(models, batch, optimizers, cfg, dropout)
        for sch in schedulers.values():
            sch.step()
        run["step"] = step
        history.append({"step": step, "phase": phase, "epoch": epoch, "step_s": time.perf_counter() - t_step,
                        **losses})

    def validate(phase: int, step: int) -> None:
        loss = context_lm_loss(models, validation, cfg.max_problem_tokens, cfg.threshold, cfg.context_tokens)
        run["val"].append({"step": step, "phase": phase, "val_loss": loss})
        if stopping.measure(step, loss) and stopping.modules:
            run["best_steps"][chosen[phase][0]] = step
        print(f"step {step} phase {phase}: validation loss {loss:.4f} (best {stopping.best_loss:.4f} at step "
              f"{stopping.best_step or 0})", flush=True)

    def start_phase2() -> None:
        """The generator phase 1 left is phase 2's first candidate; the parser that will drive L_eq, measured."""
        if validation:
            validate(2, s1)
            if models.mwp2eq is not None and cfg.equation_loss:
                problems, equations = [ex.problem for ex in validation], [ex.equation for ex in validation]
                if mwp2eq_target is None:
                    run["mwp2eq_val_accuracy"] = parse_accuracy(models.mwp2eq, models.tokenizer, problems, equations,
                                                                batch_size=16,
                                                                device=next(models.mwp2eq.parameters()).device)
                else:
                    encoded = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in get(2, 0)]
                    run["mwp2eq_gate"] = reach_parse_accuracy(models, encoded, problems, equations, cfg, optimizers,
                                                              target=mwp2eq_target, seed=seed)
                    run["mwp2eq_val_accuracy"] = run["mwp2eq_gate"]["accuracy"]
                print(f"co-trained mwp2eq: exact parse accuracy {run['mwp2eq_val_accuracy']:.3f} on the "
                      f"{len(validation)} validation problems as phase 2 starts", flush=True)
        run["phase2_started"] = True

    def after_step(phase: int, end: int, step: int) -> bool:
        """Validation when due; at the phase's end (or when it stops early) the chosen component's best weights go
        on and the state is saved there; the log window. True: the phase stops here."""
        nonlocal stopping
        stop = False
        if validation and ((cfg.eval_every and step % cfg.eval_every == 0) or step == end):
            validate(phase, step)
            if stopping.out_of_patience and step != end:
                print(f"phase {phase}: no better validation loss in {stopping.patience} measurements; "
                      f"stopping it at step {step}", flush=True)
                history[-1]["stopped_phase"] = phase
                stop = True
        if stop or step == end:
            stopping.restore()
            stopping = phase_stopping(2)
            run["step"] = end
            if end < s1 + s2 and checkpoints.kept:
                checkpoints.save(state_at(end))
        logged = end if stop else step
        if logged % log_every == 0 or logged == end:
            window = [h for h in history[-log_every:] if h["phase"] == phase]
            record = {"step": logged, "phase": phase, "epoch": history[-1]["epoch"]}
            for key in sorted({k for h in window for k in h} - {"step", "phase", "epoch"}):
                vals = [h[key] for h in window if key in h]
                record[key] = sum(vals) / len(vals)
            print(f"step {logged}/{s1 + s2} phase {phase} " + " ".join(
                f"{k} {v:.4f}" for k, v in record.items() if k not in ("step", "phase", "epoch")), flush=True)
            if on_log is not None:
                on_log(record)
        return stop

    t0 = time.perf_counter()
    for phase, start, end in ((1, 0, s1), (2, s1, s1 + s2)):
        if phase == 2 and run["step"] == s1 and s2 and not run.get("phase2_started"):
            start_phase2()
        if run["step"] < end:
            run_steps(max(run["step"], start), end,
                      step=lambda g, phase=phase, start=start: train_step(phase, start, g),
                      after_step=lambda g, _ended, phase=phase, end=end: after_step(phase, end, g),
                      checkpoints=checkpoints, state=state_at, on_step=on_step)  # it ends with run["step"] = end
    for m in modules.values():
        m.eval()
    steps_run = tuple(sum(h["phase"] == p for h in history) for p in (1, 2))
    return {"history": history, "val": run["val"], "best_steps": run["best_steps"], "steps": (s1, s2),
            "mwp2eq_val_accuracy": run["mwp2eq_val_accuracy"], "mwp2eq_gate": run.get("mwp2eq_gate"),
            "steps_run": steps_run, "wall_time_s": time.perf_counter() - t0, "resumed_from": resumed_from}


LOSS_KEYS = ("lm", "eq", "kl", "mwp2eq", "selected_frac", "written_tokens")


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
