"""Tuning ours' generator on what readers found right: its own candidates for training-fold equations, read blind.

The prompt is the one inference builds (mwpgen/ours/inputs.py): the equation and the context words the candidate was
written from, in the fixed-width slot; the selector and the co-trained mwp2eq are left as they are, so the tuned bundle
is used as ours is (`mwpgen generate`, the served model, the tables).

- RFT (rejection-sampling fine-tuning; STaR, Zelikman et al. 2022): L_LM on the read-right candidates, mixed with
  the fold's own training problems so fluency holds: L = - sum_i log p_Theta(M_i | E_i, c_i) / sum_i |M_i|, the
  per-token mean over the batch (as ours' L_LM is).
- DPO (Rafailov et al. 2023, Eq. 7) on pairs of one equation and context, a right candidate M+ and a wrong M-,
  against the generator before tuning as the frozen reference pi_ref:

      L = - log sigma( beta [ (log pi(M+) - log pi_ref(M+)) - (log pi(M-) - log pi_ref(M-)) ] )

  pi_ref's log-probabilities are computed once, before the first step (the reference never changes), so no
  second model is held in memory.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mwpgen import resume
from mwpgen.batching import seeded_batches
from mwpgen.early_stopping import EarlyStopping
from mwpgen.lm.prompts import IGNORE_INDEX
from mwpgen.log_window import LogWindow
from mwpgen.ours.inputs import JointExample, encode_joint, generator_inputs
from mwpgen.resume import Checkpoints
from mwpgen.trainer import StepResult, Trainer, ValidationSchedule


@dataclass(frozen=True)
class Pair:
    chosen: JointExample
    rejected: JointExample


def sequence_logprobs(generator, tokenizer, examples: Sequence[JointExample], width: int,
                      max_problem_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of log p_Theta over each example's problem tokens and EOS [B], their counts [B]), teacher-forced
    from the example's keywords as the context slot (inputs.generator_inputs with c=None)."""
    batch = [encode_joint(tokenizer, ex, max_problem_tokens) for ex in examples]
    inputs = generator_inputs(generator, tokenizer, batch, width)
    logits = generator(inputs_embeds=inputs["inputs_embeds"], attention_mask=inputs["attention_mask"]).logits
    labels = inputs["labels"][:, 1:]
    mask = labels != IGNORE_INDEX
    logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (logp * mask).sum(-1), mask.sum(-1)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 7 of Rafailov et al. (2023), averaged over the batch, and each pair's implicit reward margin."""
    margin = beta * ((policy_chosen - reference_chosen) - (policy_rejected - reference_rejected))
    return -F.logsigmoid(margin).mean(), margin.detach()


def preference_pairs(readings: Sequence[dict], per_group: int, seed: int) -> list[Pair]:
    """Right-vs-wrong pairs of candidates written for the same (problem id, equation, context): at most
    `per_group` per group, drawn seeded. `readings`: dicts with id, equation, context (space-separated words),
    generated and label (1 = read right)."""
    groups: dict[tuple[str, str, str], dict[int, list[str]]] = {}
    for r in readings:
        groups.setdefault((r["id"], r["equation"], r["context"]), {0: [], 1: []})[int(r["label"])].append(
            r["generated"])
    rng = random.Random(f"{seed}:pairs")
    pairs = []
    for (_, equation, context), by_label in sorted(groups.items()):
        combos = [(c, w) for c in by_label[1] for w in by_label[0]]
        for chosen, rejected in rng.sample(combos, min(per_group, len(combos))):
            words = tuple(context.split())
            pairs.append(Pair(JointExample(equation, chosen, words), JointExample(equation, rejected, words)))
    return pairs


def rft_examples(
    readings: Sequence[dict], training: Sequence[JointExample], mix: float, seed: int
) -> list[JointExample]:
    """The read-right candidates, and `mix` training problems per candidate (seeded draw, with replacement when
    there are fewer)."""
    right = [JointExample(r["equation"], r["generated"], tuple(r["context"].split()))
             for r in readings if int(r["label"]) == 1]
    rng = random.Random(f"{seed}:rft")
    n_mix = round(mix * len(right))
    mixed = rng.sample(list(training), n_mix) if n_mix <= len(training) else rng.choices(list(training), k=n_mix)
    examples = right + mixed
    rng.shuffle(examples)
    return examples


def tune_step(generator, tokenizer, optimizer, *, method: str, batch, width: int, max_problem_tokens: int,
              beta: float = 0.1, reference: tuple[torch.Tensor, torch.Tensor] | None = None,
              autocast_dtype: torch.dtype | None = None, max_grad_norm: float = 1.0) -> dict:
    """One optimizer step. rft: `batch` is JointExamples; dpo: Pairs with `reference` = (log pi_ref(M+),
    log pi_ref(M-)) for them."""
    device = generator.get_input_embeddings().weight.device
    # DPO compares pi with pi_ref computed once in eval mode: the policy's forward runs without dropout too (as TRL
    # does), so at the first step the margin is 0, not dropout noise. RFT trains as ours was trained.
    generator.train(method != "dpo")
    with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        if method == "rft":
            logp, n = sequence_logprobs(generator, tokenizer, batch, width, max_problem_tokens)
            loss = -(logp.sum() / n.sum())
            stats = {"train_loss": float(loss.detach())}
        elif method == "dpo":
            both, _ = sequence_logprobs(generator, tokenizer, [p.chosen for p in batch] + [p.rejected for p in batch],
                                        width, max_problem_tokens)
            chosen, rejected = both[: len(batch)], both[len(batch):]
            loss, margin = dpo_loss(chosen, rejected, reference[0], reference[1], beta)
            stats = {"train_loss": float(loss.detach()), "margin": float(margin.mean()),
                     "accuracy": float((margin > 0).float().mean())}
        else:
            raise ValueError(f"method must be rft or dpo, not {method!r}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(generator.parameters(), max_grad_norm)
    optimizer.step()
    return stats


@torch.no_grad()
def reference_logprobs(generator, tokenizer, pairs: Sequence[Pair], width: int, max_problem_tokens: int,
                       batch_size: int = 8,
                       autocast_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi_ref(M+) and log pi_ref(M-) for every pair, from the generator before tuning, in the precision the
    policy's steps use (`autocast_dtype`), so that the two differ only by what tuning changed."""
    was_training = generator.training
    generator.eval()
    device = generator.get_input_embeddings().weight.device
    chosen, rejected = [], []
    for start in range(0, len(pairs), batch_size):
        part = pairs[start:start + batch_size]
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            chosen.append(sequence_logprobs(generator, tokenizer, [p.chosen for p in part], width,
                                            max_problem_tokens)[0])
            rejected.append(sequence_logprobs(generator, tokenizer, [p.rejected for p in part], width,
                                              max_problem_tokens)[0])
    generator.train(was_training)
    return torch.cat(chosen), torch.cat(rejected)


def unique_candidates(readings: Sequence[dict]) -> list[dict]:
    """One reading per (problem id, equation, context, text): a text two samples wrote alike counts once."""
    seen, out = set(), []
    for r in readings:
        key = (r["id"], r["equation"], r["context"], r["generated"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def tune_generator(generator, tokenizer, method: str, data: Sequence, *, epochs: int, max_steps: int, batch_size: int,
                   lr: float, beta: float, seed: int, width: int, max_problem_tokens: int,
                   autocast_dtype: torch.dtype | None = None, log_every: int, on_log=None, resume_dir=None,
                   save_every: int, fingerprint_extra: dict | None = None, on_step=None) -> dict:
    """Tune the generator in place: `epochs` passes (at most `max_steps` steps, 0 = no cap) over `data`, JointExamples
    (rft) or Pairs (dpo, against the generator as it is now: pi_ref of the pairs the steps will visit is computed
    here first), in seeded batches, through the one training loop (mwpgen/trainer.py): with `resume_dir`, the state
    is saved there every `save_every` steps and a killed tuning resumes from it (the caller deletes it once the
    tuned model is saved). No validation slice: every reading is of a training equation, so nothing here measures
    or stops early; the last step's weights are the tuned ones.
    Returns the Trainer's summary ("history": per-step stats with "step" and "epoch", "train_loss" the objective's
    loss; "steps", "final_train_loss", "log", "timing", ...) and "n"; `on_log(record)` gets the mean of each
    `log_every` steps' stats (and of the last ones)."""
    if not data:
        raise ValueError(f"no {method} data to tune on (no read-right candidate, or no right/wrong pair)")
    # Streams 7_919 + epoch: apart from the ones the trainers draw (epoch, phase * 1_009 + ...), so a tuning's batch
    # order is its own even at the seed ours was trained with.
    schedule = [(epoch, idx) for epoch in range(epochs) for idx in seeded_batches(len(data), batch_size, seed,
                                                                                   7_919 + epoch)]
    schedule = schedule[:max_steps] if max_steps else schedule
    reference = None
    if method == "dpo":  # pi_ref of the pairs the schedule visits, before the first step changes the generator
        visited = sorted({i for _, idx in schedule for i in idx})
        chosen, rejected = reference_logprobs(generator, tokenizer, [data[i] for i in visited], width,
                                              max_problem_tokens, batch_size, autocast_dtype)
        reference = {i: (chosen[k], rejected[k]) for k, i in enumerate(visited)}
    optimizer = torch.optim.AdamW(generator.parameters(), lr=lr, weight_decay=0.0)  # Adam, as ours was trained
    torch.manual_seed(seed)
    fingerprint = resume.fingerprint(method=method, data=list(data), epochs=epochs, max_steps=max_steps,
                                     batch_size=batch_size, lr=lr, beta=beta, seed=seed, width=width,
                                     max_problem_tokens=max_problem_tokens, precision=str(autocast_dtype),
                                     extra=fingerprint_extra or {})
    log = LogWindow(log_every, len(schedule), on_log)
    resumable = {"generator": generator, "optimizer": optimizer}
    trainer = Trainer(Checkpoints(resume_dir, fingerprint, save_every), resumable, log, on_step=on_step)

    def tune_one(step: int) -> StepResult:
        epoch, idx = schedule[step - 1]
        ref = None if reference is None else (torch.stack([reference[i][0] for i in idx]),
                                              torch.stack([reference[i][1] for i in idx]))
        stats = tune_step(generator, tokenizer, optimizer, method=method, batch=[data[i] for i in idx],
                          width=width, max_problem_tokens=max_problem_tokens, beta=beta, reference=ref,
                          autocast_dtype=autocast_dtype)
        log.add(stats)
        return StepResult(stats, epoch, step == len(schedule) or schedule[step][0] != epoch)

    trainer.fit(tune_one, None, end=len(schedule), stopping=EarlyStopping({}, patience=0),
                schedule=ValidationSchedule(every=0, at_epoch_end=False, at_start=False))
    generator.eval()
    return {**trainer.summary(), "n": len(data)}
