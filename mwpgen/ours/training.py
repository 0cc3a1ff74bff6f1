"""Training "ours": phase 1 then phase 2 (joint_step.py), two spans of the one training loop (mwpgen/trainer.py), which
saves the state at phase 1's end, measures phase 2's starting point and then readies the parser (measure_parser).

The whole run is one sequence of global steps: phase 1 takes steps [0, S1), phase 2 [S1, S1 + S2). Step g's
batch is a pure function of (seed, phase, epoch, position), so the data position is just g. Every
`save_every` steps the state is written atomically to `state_dir/state.pt`: model, selector and optimizer
states, the LR schedulers, g, the loss history and the torch / Python / CUDA RNG states (Bernoulli context
samples, Gumbel noise, dropout and context permutation all draw from the global torch RNG). A killed run
restarts from that file and, on the same device, ends bit-for-bit where an uninterrupted run would
(tests/unit/test_train_joint.py). The file carries a fingerprint of everything that shapes the run; a state written
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
from collections.abc import Callable, Sequence
from functools import partial

import torch

from mwpgen import resume
from mwpgen.batching import seeded_batches
from mwpgen.config.schema import OursTrainParams
from mwpgen.early_stopping import EarlyStopping
from mwpgen.lm.training import parse_accuracy
from mwpgen.log_window import LogWindow
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.ours.joint_step import JointModels, make_optimizers, mwp2eq_step, phase1_step, phase2_step
from mwpgen.ours.parser_gate import reach_parse_accuracy
from mwpgen.ours.selection_stats import context_lm_loss
from mwpgen.resume import Checkpoints
from mwpgen.trainer import Notes, StepResult, Trainer, ValidationSchedule


def phase_steps(cfg: OursTrainParams, n_examples: int) -> tuple[int, int]:
    """(S1, S2): each phase's steps, its epochs over n examples capped by its max_steps (0: no cap)."""
    per_epoch = math.ceil(n_examples / cfg.batch_size)
    def cap(p):
        return min(p.epochs * per_epoch, p.max_steps) if p.max_steps else p.epochs * per_epoch
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


# Each phase's component chosen on the validation loss: phase 1 keeps its best selector and runs its whole schedule;
# phase 2 keeps its best generator and stops when cfg.patience measurements find none better (module docstring).
CHOSEN = {1: "selector", 2: "generator"}


class EpochBatches:
    """The current epoch's encoded examples and its batch orders, built once per (phase, epoch): the first order is
    the step's batch; phase 1's co-trained mwp2eq also reads the same index of the others (fresh seeded orders of
    the same epoch, `mwp2eq_passes` in all)."""

    def __init__(self, tokenizer, examples: Callable[[int, int], Sequence[JointExample]], cfg: OursTrainParams,
                 seed: int, mwp2eq_passes: int):
        self.tokenizer, self.examples, self.cfg, self.seed, self.mwp2eq_passes = (tokenizer, examples, cfg, seed,
                                                                                  mwp2eq_passes)
        self.n = len(examples(1, 0))
        self.per_epoch = math.ceil(self.n / cfg.batch_size)
        self._key, self._value = None, None

    def of(self, phase: int, epoch: int) -> tuple[list, list]:
        if self._key != (phase, epoch):
            self._key, self._value = None, None
            encoded = [encode_joint(self.tokenizer, ex, self.cfg.max_problem_tokens)
                       for ex in self.examples(phase, epoch)]
            # Length-grouped by the generator row's varying part (the context slot has a fixed width).
            lengths = [len(e.prefix) + len(e.problem.ids) for e in encoded]
            orders = [seeded_batches(self.n, self.cfg.batch_size, self.seed, phase * 1_009 + epoch + 100_003 * p,
                                     lengths)
                      for p in range(max(1, self.mwp2eq_passes) if phase == 1 else 1)]
            self._key, self._value = (phase, epoch), (encoded, orders)
        return self._value


def joint_train_step(models: JointModels, batches: EpochBatches, optimizers: dict, schedulers: dict,
                     cfg: OursTrainParams, dropout: float, log: LogWindow, phase: int, start: int,
                     step: int) -> StepResult:
    """Global step `step` of `phase` (which began after step `start`): its batch, the phase's step (joint_step.py), and,
    in phase 1, the co-trained mwp2eq's passes. Stats: "train_loss" (L_LM per token, the generator's loss as the
    baselines report theirs), "objective" (what the phase minimises, per token) and the phase's own terms."""
    epoch, index = divmod(step - 1 - start, batches.per_epoch)
    encoded, orders = batches.of(phase, epoch)
    batch = [encoded[i] for i in orders[0][index]]
    if models.selector is not None:
        models.selector.requires_grad_(phase == 1)  # phase 2: the selector is frozen
    if phase == 1:
        losses = phase1_step(models, batch, optimizers, cfg, dropout)
        if batches.mwp2eq_passes:
            passes = [mwp2eq_step(models, [encoded[i] for i in order[index]], optimizers, cfg)["mwp2eq"]
                      for order in orders[:batches.mwp2eq_passes]]
            losses["mwp2eq"] = sum(passes) / len(passes)
    else:
        losses = phase2_step(models, batch, optimizers, cfg, dropout)
    for scheduler in schedulers.values():
        scheduler.step()
    stats = {"train_loss": losses.pop("lm"), "objective": losses.pop("loss"), **losses}
    log.add(stats)
    return StepResult(stats, epoch, index == batches.per_epoch - 1)


def measure_parser(models: JointModels, validation: Sequence[JointExample], batches: EpochBatches,
                   cfg: OursTrainParams, optimizers: dict, target: float | None, seed: int, notes: Notes) -> None:
    """As phase 2 starts, the co-trained mwp2eq that will drive L_eq: its exact parse accuracy on the validation
    problems, after it learned up to `target` (the evaluator's, parser_gate.py) when one is given; into `notes`."""
    if not validation or models.mwp2eq is None or not cfg.equation_loss:
        return
    problems, equations = [ex.problem for ex in validation], [ex.equation for ex in validation]
    if target is None:
        notes["mwp2eq_val_accuracy"] = parse_accuracy(models.mwp2eq, models.tokenizer, problems, equations,
                                                      batch_size=16, device=next(models.mwp2eq.parameters()).device)
    else:
        encoded = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in batches.examples(2, 0)]
        notes["mwp2eq_gate"] = reach_parse_accuracy(models, encoded, problems, equations, cfg, optimizers,
                                                    target=target, seed=seed)
        notes["mwp2eq_val_accuracy"] = notes["mwp2eq_gate"]["accuracy"]
    print(f"co-trained mwp2eq: exact parse accuracy {notes['mwp2eq_val_accuracy']:.3f} on the {len(validation)} "
          f"validation problems as phase 2 starts", flush=True)


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
    Returns the Trainer's summary (mwpgen/trainer.py: "steps", "best_step", "best_val_loss" of the generator,
    "final_train_loss", "history" with each step's "phase", "validations", "spans", "timing", ...) and
    "best_steps": {component: step}, "scheduled_steps": (S1, S2), "steps_run": the steps each phase ran (fewer
    after an early stop), "mwp2eq_val_accuracy" (None without a mwp2eq or validation), "mwp2eq_gate"
    (parser_gate's record, or None)."""
    get = examples if callable(examples) else (lambda _p, _e: examples)
    s1, s2 = phase_steps(cfg, len(get(1, 0)))
    fingerprint = run_fingerprint(
        cfg, seed, get(1, 0), (fingerprint_extra or {}) | {"dropout": dropout, "batching": "length_grouped"}
    )
    torch.manual_seed(seed)
    random.seed(seed)
    optimizers = make_optimizers(models, lr=cfg.lr, selector_lr=cfg.selector_lr or cfg.lr)
    schedulers = {k: torch.optim.lr_scheduler.LambdaLR(o, lambda _s: 1.0) for k, o in optimizers.items()}
    modules = _modules(models)
    notes = Notes(mwp2eq_val_accuracy=None, mwp2eq_gate=None)
    log = LogWindow(log_every, s1 + s2, on_log)
    resumable = {**modules, **{f"{k}_optimizer": o for k, o in optimizers.items()},
                 **{f"{k}_scheduler": sch for k, sch in schedulers.items()}, "notes": notes}
    trainer = Trainer(Checkpoints(state_dir, fingerprint, cfg.save_every), resumable, log, on_step=on_step)
    mwp2eq_passes = cfg.mwp2eq_batches_per_step if cfg.mwp2eq_in_phase1 and models.mwp2eq is not None else 0
    batches = EpochBatches(models.tokenizer, get, cfg, seed, mwp2eq_passes)
    validate = (lambda: {"val_loss": context_lm_loss(models, validation, cfg.max_problem_tokens, cfg.threshold,
                                                     cfg.context_tokens)}) if validation else None

    for phase, start, end in ((1, 0, s1), (2, s1, s1 + s2)):
        chosen = CHOSEN[phase]
        stopping = EarlyStopping({chosen: modules[chosen]} if chosen in modules else {},
                                 cfg.patience if phase == 2 else 0)
        trainer.fit(partial(joint_train_step, models, batches, optimizers, schedulers, cfg, dropout, log, phase, start),
                    validate, end=end, stopping=stopping, start=start, tags={"phase": phase},
                    schedule=ValidationSchedule(every=cfg.eval_every, at_epoch_end=False, at_start=phase == 2),
                    on_fresh_start=partial(measure_parser, models, validation, batches, cfg, optimizers, mwp2eq_target,
                                           seed, notes) if phase == 2 else None,
                    save_at_end=end < s1 + s2)
    for m in modules.values():
        m.eval()
    summary = trainer.summary()
    best_steps = {CHOSEN[span["phase"]]: span["best_step"] for span in summary["spans"]
                  if CHOSEN[span["phase"]] in modules and span["best_step"] is not None}
    steps_run = tuple(sum(h["phase"] == p for h in summary["history"]) for p in (1, 2))
    return {**summary, "best_steps": best_steps, "scheduled_steps": (s1, s2), "steps_run": steps_run, **notes}


# Each step's losses in the history (joint_train_step): the generator's L_LM, the phase's objective and its terms.
LOSS_KEYS = ("train_loss", "objective", "eq", "kl", "mwp2eq", "selected_frac", "written_tokens")


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
