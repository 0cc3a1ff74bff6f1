"""One joint training step of "ours" (Section 2.3): the losses of generator p_Theta, context selector q_Psi and
co-trained mwp2eq p_Phi in phase 1 or 2, and their update; the trainer (training.py) runs these steps.

Reading of the paper (Section 2.3 + supplementary "Training Details"):

  phase 1  selector + generator, L_VAE = L_LM + beta L_c (Eq. 6). c ~ Bernoulli(q_Psi(M)) per
           candidate word; straight-through (selector.py) carries L_LM's gradient to Psi, L_c's
           analytic gradient reaches Psi directly.
  phase 2  selector FROZEN (it still supplies contexts, sampled c ~ Bernoulli(q), no gradient);
           generator trained with L_LM + alpha L_eq (Eq. 4, Gumbel-softmax relaxation of a problem M' the
           generator writes itself, consistency.py); mwp2eq keeps
           learning its own NLL on the REAL (problem -> equation) pairs of the batch. By default
           L_eq does not train Phi (`mwp2eq_phase2: real`): a mwp2eq that also fits the
           generator's soft problems could learn to decode E from anything the generator emits,
           weakening the constraint; `mwp2eq_phase2: generated` gives the literal "mwp2eq optimised with
           Eq. 4" reading, where one mwp2eq pass (on the soft problem) serves both L_eq's gradient to
           Theta and Phi's own training: the cheaper phase-2 step (benchmarks/bench_joint_step.py).

Loss scale: the paper's objective is a SUM, L = sum_t L_LM + alpha sum_t L_eq + beta sum_words KL.
We divide that whole sum by the number of problem (target) tokens in the batch, so the LM part is
the per-token mean of train_lm.lm_loss (same learning-rate scale as the baselines) and alpha, beta
keep the paper's relative weighting. Logged "lm" and "eq" are per-token means, "kl" per problem.

The generator's input for one example is built by inputs.py, as generation builds it. Both phases apply keyword
dropout to the sampled c (inputs.drop_words), as the baselines drop keywords: the paper's "all models".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.prompts import IGNORE_INDEX, collate, encode_example, mwp2eq_example
from mwpgen.lm.training import lm_loss
from mwpgen.ours.consistency import (
    check_shared_vocabulary,
    equation_consistency_loss,
    free_running_problems,
    teacher_forced_problems,
)
from mwpgen.ours.inputs import Encoded, JointExample, drop_words, encode_joint, generator_inputs, prompt_embeddings
from mwpgen.ours.selector import ContextSelector, bernoulli_kl, sample_straight_through, selector_batch

MAX_GRAD_NORM = 1.0  # every model of ours, as the baselines (mwpgen/lm/training.py)


@dataclass
class JointModels:
    generator: torch.nn.Module
    mwp2eq: torch.nn.Module | None  # None when L_eq is off: nothing would use it (Table 4's "w/o L_eq" rows)
    tokenizer: object  # shared by generator and mwp2eq (check_shared_vocabulary)
    selector: ContextSelector | None = None
    amp_dtype: torch.dtype | None = None  # autocast of the forward passes (mwpgen.device.autocast_dtype), None: fp32

    def check(self, mwp2eq_tokenizer=None) -> None:
        if self.mwp2eq is not None:
            check_shared_vocabulary(self.tokenizer, mwp2eq_tokenizer or self.tokenizer, self.generator, self.mwp2eq)


def generator_lm(models: JointModels, batch: Sequence[Encoded], c, width: int, permute: bool = True):
    """One teacher-forced generator pass: (logits, sum of Eq. 3 over target tokens, n target tokens, starts).
    `width`: the context slot's tokens; `permute`: the slot's words in a fresh order per example (supplementary:
    "permute the order"); off for a deterministic score."""
    inp = generator_inputs(models.generator, models.tokenizer, batch, width, c, permute)
    dev = inp["inputs_embeds"].device
    with torch.autocast(dev.type, dtype=models.amp_dtype, enabled=models.amp_dtype is not None):
        logits = models.generator(inputs_embeds=inp["inputs_embeds"], attention_mask=inp["attention_mask"]).logits
    n_tok = int((inp["labels"][:, 1:] != IGNORE_INDEX).sum())
    return logits, lm_loss(logits, inp["labels"]) * n_tok, n_tok, inp["starts"]


def _selector_q(models: JointModels, batch: Sequence[Encoded]):
    sel = selector_batch([b.problem for b in batch], models.tokenizer.pad_token_id, models.selector.embeddings.device)
    return models.selector(**sel), sel["candidate"]


def phase1_losses(models: JointModels, batch: Sequence[Encoded], cfg: OursTrainParams,
                  dropout: float) -> dict[str, torch.Tensor]:
    """Phase 1 objective (Eq. 6): L_LM + beta L_c, gradients into Theta and (via straight-through) Psi.
    `dropout`: keyword dropout of the sampled context (keywords.dropout)."""
    c = kl = None
    if cfg.context == "selector":
        q, cand = _selector_q(models, batch)
        c = sample_straight_through(q)  # forward 0/1, backward dc/dq = 1
        kl = bernoulli_kl(q, cfg.rho, cand).sum()  # L_c summed over the batch
        n_sel, n_cand = float((c.detach() * cand).sum()), float(cand.sum())
        c = drop_words(c, dropout)
    _, lm_sum, n_tok, _ = generator_lm(models, batch, c, cfg.context_tokens)
    loss = lm_sum
    if kl is not None and cfg.context_loss:
        loss = loss + cfg.beta * kl
    out = {"loss": loss / n_tok, "lm": lm_sum / n_tok}
    if kl is not None:
        out |= {"kl": kl / len(batch), "selected_frac": torch.tensor(n_sel / max(n_cand, 1.0))}
    return out


def relaxed_problems(models: JointModels, batch: Sequence[Encoded], c, logits, starts,
                     cfg: OursTrainParams) -> list[torch.Tensor]:
    """M' for L_eq (consistency.py): written by the generator from each example's prompt (equation_text = free),
    or the teacher-forced logits of the L_LM pass relaxed (teacher_forced)."""
    if cfg.equation_text == "teacher_forced":
        # logits[s - 1 + t] predicts problem token t (the EOS prediction is not part of M').
        f = [logits[i, s - 1 : s - 1 + len(b.problem.ids)] for i, (b, s) in enumerate(zip(batch, starts))]
        return teacher_forced_problems(f, cfg.tau, cfg.relaxation)
    emb = models.generator.get_input_embeddings()
    # The same context as the L_LM pass, in order of appearance (the permutation is for L_LM's sake).
    prompts = [prompt_embeddings(emb, b, cfg.context_tokens, None if c is None else c[i]) for i, b in enumerate(batch)]
    return free_running_problems(models.generator, prompts, models.tokenizer.eos_token_id, cfg.free_run_tokens,
                                 tau=cfg.tau, relaxation=cfg.relaxation, autocast_dtype=models.amp_dtype)


def phase2_losses(models: JointModels, batch: Sequence[Encoded], cfg: OursTrainParams,
                  dropout: float) -> dict[str, torch.Tensor]:
    """Phase 2: generator L_LM + alpha L_eq (Eq. 4, relaxed); mwp2eq NLL on the real pairs; selector frozen."""
    c = None
    if cfg.context == "selector":
        with torch.no_grad():
            c = torch.bernoulli(_selector_q(models, batch)[0])  # frozen Psi: plain samples, no gradient
        c = drop_words(c, dropout)
    logits, lm_sum, n_tok, starts = generator_lm(models, batch, c, cfg.context_tokens)
    loss, out = lm_sum, {"lm": lm_sum / n_tok}
    if cfg.equation_loss:
        soft = relaxed_problems(models, batch, c, logits, starts, cfg)
        eq_sum, n_eq = equation_consistency_loss(
            models.mwp2eq, models.tokenizer, soft, [b.example.equation for b in batch],
            train_mwp2eq=cfg.mwp2eq_phase2 == "generated", autocast_dtype=models.amp_dtype)
        out["written_tokens"] = torch.tensor(sum(m.shape[0] for m in soft) / len(soft))
        loss = loss + cfg.alpha * eq_sum
        out["eq"] = eq_sum / max(n_eq, 1)
    out["loss"] = loss / n_tok
    if models.mwp2eq is not None and cfg.mwp2eq_phase2 == "real":
        out["mwp2eq"] = mwp2eq_real_loss(models, batch, cfg)
    return out


def mwp2eq_real_loss(models: JointModels, batch: Sequence[Encoded], cfg: OursTrainParams) -> torch.Tensor:
    """mwp2eq's own objective (Eq. 4 on REAL problems): per-token NLL of E given the batch's real M."""
    real = [encode_example(models.tokenizer, mwp2eq_example(b.example.problem, b.example.equation), cfg.max_length)
            for b in batch]
    dev = models.mwp2eq.get_input_embeddings().weight.device
    pb = {k: v.to(dev) for k, v in collate(real, models.tokenizer.pad_token_id).items()}
    with torch.autocast(dev.type, dtype=models.amp_dtype, enabled=models.amp_dtype is not None):
        p_logits = models.mwp2eq(input_ids=pb["input_ids"], attention_mask=pb["attention_mask"]).logits
    return lm_loss(p_logits, pb["labels"])


def make_optimizers(models: JointModels, lr: float, selector_lr: float,
                    mwp2eq_lr: float | None = None) -> dict[str, torch.optim.Optimizer]:
    """Adam (AdamW, weight_decay 0) per model (`selector_lr` 0: lr); the paper uses lr 5e-5 for "ours"."""
    opt = lambda m, r: torch.optim.AdamW(m.parameters(), lr=r, weight_decay=0.0)  # noqa: E731 — a one-line local helper
    out = {"generator": opt(models.generator, lr)}
    if models.mwp2eq is not None:
        out["mwp2eq"] = opt(models.mwp2eq, mwp2eq_lr or lr)
    if models.selector is not None:
        out["selector"] = opt(models.selector, selector_lr or lr)
    return out


def _update(modules: dict[str, torch.nn.Module], optimizers: dict, max_grad_norm: float) -> None:
    for name, module in modules.items():
        params = [p for p in module.parameters() if p.grad is not None]
        if params:
            torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizers[name].step()
        optimizers[name].zero_grad(set_to_none=True)


def phase1_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict, cfg: OursTrainParams,
                dropout: float) -> dict[str, float]:
    """One optimisation step of phase 1 (selector + generator). Returns the losses as floats."""
    models.generator.train()
    losses = phase1_losses(models, batch, cfg, dropout)
    losses["loss"].backward()
    trained = {"generator": models.generator}
    if cfg.context == "selector":
        trained["selector"] = models.selector
    _update(trained, optimizers, MAX_GRAD_NORM)
    return {k: float(v.detach()) for k, v in losses.items()}


def mwp2eq_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict,
                cfg: OursTrainParams) -> dict[str, float]:
    """mwp2eq alone on the real pairs (phase 1, when the mwp2eq learns beside the generator)."""
    models.mwp2eq.train()
    loss = mwp2eq_real_loss(models, batch, cfg)
    loss.backward()
    _update({"mwp2eq": models.mwp2eq}, optimizers, MAX_GRAD_NORM)
    return {"mwp2eq": float(loss.detach())}


def phase2_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict, cfg: OursTrainParams,
                dropout: float) -> dict[str, float]:
    """One optimisation step of phase 2 (generator + mwp2eq, selector frozen). Returns the losses."""
    if cfg.equation_loss and models.mwp2eq is None:
        raise ValueError("phase 2 with L_eq needs the mwp2eq model (JointModels.mwp2eq is None)")
    models.generator.train()
    trained = {"generator": models.generator}
    losses = phase2_losses(models, batch, cfg, dropout)
    total = losses["loss"]
    if models.mwp2eq is not None:
        models.mwp2eq.train()
        if "mwp2eq" in losses:
            total = total + losses["mwp2eq"]  # disjoint parameters: one backward for both
        trained["mwp2eq"] = models.mwp2eq
    total.backward()
    _update(trained, optimizers, MAX_GRAD_NORM)
    return {k: float(v.detach()) for k, v in losses.items()}


def joint_step(phase: int, models: JointModels, examples: Sequence[JointExample], optimizers: dict,
               cfg: OursTrainParams, dropout: float) -> dict[str, float]:
    """Encode `examples` and take one step of `phase` (1 or 2)."""
    batch = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in examples]
    if phase == 1:
        return phase1_step(models, batch, optimizers, cfg, dropout)
    if phase == 2:
        return phase2_step(models, batch, optimizers, cfg, dropout)
    raise ValueError(f"phase must be 1 or 2, got {phase}")
