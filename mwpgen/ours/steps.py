"""Joint training of "ours": generator p_Theta, context selector q_Psi and mwp2eq p_Phi (Section 2.3).

Reading of the paper (Section 2.3 + supplementary "Training Details"):

  phase 1  selector + generator, L_VAE = L_LM + beta L_c (Eq. 6). c ~ Bernoulli(q_Psi(M)) per
           candidate word; straight-through (selector.py) carries L_LM's gradient to Psi, L_c's
           analytic gradient reaches Psi directly.
  phase 2  selector FROZEN (it still supplies contexts, sampled c ~ Bernoulli(q), no gradient);
           generator trained with L_LM + alpha L_eq (Eq. 4, Gumbel-softmax relaxation); mwp2eq keeps
           learning its own NLL on the REAL (problem -> equation) pairs of the batch. By default
           L_eq does not train Phi (`mwp2eq_on_generated=False`): a mwp2eq that also fits the
           generator's soft problems could learn to decode E from anything the generator emits,
           weakening the constraint; True gives the literal "mwp2eq optimised with Eq. 4" reading.
           With `mwp2eq_on_real=False` as well, one mwp2eq pass (on the soft problem) serves both L_eq's
           gradient to Theta and Phi's own training: the cheaper phase-2 step (bench/bench_joint_step.py).

Loss scale: the paper's objective is a SUM, L = sum_t L_LM + alpha sum_t L_eq + beta sum_words KL.
We divide that whole sum by the number of problem (target) tokens in the batch, so the LM part is
the per-token mean of train_lm.lm_loss (same learning-rate scale as the baselines) and alpha, beta
keep the paper's relative weighting. Logged "lm" and "eq" are per-token means, "kl" per problem.

Generator input for one example (prompts.py's template, context slot in the middle):
    [equation: E context:] [context slot] [ problem:] [ problem tokens] [EOS]   loss on the last two
context_source="selector": the slot holds every candidate word of the problem, gated by c
(selector.gated_context_embeddings); "keywords": the slot is the given keywords' tokens (the caller
applies keyword dropout, as prompts.generator_epochs does), i.e. the baselines' prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from mwpgen.data.keywords import keywords_per_epoch
from mwpgen.lm.prompts import GENERATOR_TEMPLATE, IGNORE_INDEX, collate, encode_example, encode_prompt, mwp2eq_example
from mwpgen.lm.training import lm_loss
from mwpgen.ours.consistency import check_shared_vocabulary, equation_consistency_loss
from mwpgen.ours.selector import (ContextSelector, WordTokens, bernoulli_kl, context_slot, gated_context_embeddings,
                                  sample_straight_through, selector_batch, tokenize_words)

CONTEXT_SOURCES = ("selector", "keywords")


@dataclass
class JointConfig:
    alpha: float = 1.0  # weight of L_eq (paper: a hyperparameter > 0, value not reported)
    beta: float = 1.0  # weight of L_c
    rho: float = 0.1  # Bernoulli prior p_c(c_i = 1)
    tau: float = 1.0  # Gumbel-softmax temperature
    relaxation: str = "gumbel"  # "gumbel" | "softmax" (ablation)
    use_eq_loss: bool = True
    use_context_loss: bool = True
    context_source: str = "selector"  # "selector" | "keywords"
    mwp2eq_on_generated: bool = False  # also train mwp2eq with L_eq (see module docstring)
    mwp2eq_on_real: bool = True  # phase 2 trains mwp2eq on the batch's real (problem, equation) pairs
    permute_context: bool = True  # shuffle the slot's words per example (supplementary: "permute the order")
    max_problem_tokens: int | None = 96
    max_length: int = 128  # mwp2eq real examples (prompts.encode_example)
    max_grad_norm: float = 1.0
    autocast_dtype: torch.dtype | None = None  # e.g. torch.bfloat16 on CUDA

    def __post_init__(self):
        if self.context_source not in CONTEXT_SOURCES:
            raise ValueError(f"context_source must be one of {CONTEXT_SOURCES}, got {self.context_source!r}")


@dataclass
class JointModels:
    generator: torch.nn.Module
    mwp2eq: torch.nn.Module | None  # None when L_eq is off: nothing would use it (Table 4's "w/o L_eq" rows)
    tokenizer: object  # shared by generator and mwp2eq (check_shared_vocabulary)
    selector: ContextSelector | None = None

    def check(self, mwp2eq_tokenizer=None) -> None:
        if self.mwp2eq is not None:
            check_shared_vocabulary(self.tokenizer, mwp2eq_tokenizer or self.tokenizer, self.generator, self.mwp2eq)


@dataclass(frozen=True)
class JointExample:
    equation: str
    problem: str
    keywords: tuple[str, ...] = ()


def epoch_examples(records: Sequence[dict], keywords: dict[str, Sequence[str]] | None, p: float,
                   seed: int) -> Callable[[int, int], list[JointExample]]:
    """`(phase, epoch) -> examples`: heuristic keywords (Table 4's keyword rows) get fresh dropout + permutation
    per epoch, as the baselines do; the selector needs none (it chooses from the problem itself)."""
    keywords_of = keywords_per_epoch(records, keywords, p, seed) if keywords else None

    def for_epoch(phase: int, epoch: int) -> list[JointExample]:
        chosen = keywords_of(phase, epoch) if keywords_of else [()] * len(records)
        return [JointExample(r["equation"], r["text"], tuple(k)) for r, k in zip(records, chosen)]
    return for_epoch


@dataclass
class Encoded:
    prefix: list[int]  # "equation: E context:" (with the tokenizer's special tokens)
    suffix: list[int]  # " problem:"
    problem: WordTokens
    keywords: list[int]  # " kw1 kw2 ..." for context_source="keywords"
    example: JointExample
    truncated: bool = False  # problem cut at max_problem_tokens: no EOS target (as prompts.py does)


def encode_joint(tokenizer, ex: JointExample, max_problem_tokens: int | None = None) -> Encoded:
    before, after = GENERATOR_TEMPLATE.split(" {context} ")
    kw = list(tokenizer(" " + " ".join(ex.keywords), add_special_tokens=False)["input_ids"]) if ex.keywords else []
    problem = tokenize_words(tokenizer, ex.problem)
    truncated = max_problem_tokens is not None and len(problem.ids) > max_problem_tokens
    if truncated:
        problem = tokenize_words(tokenizer, ex.problem, max_problem_tokens)
    return Encoded(prefix=encode_prompt(tokenizer, before.format(equation=ex.equation)),
                   suffix=list(tokenizer(" " + after, add_special_tokens=False)["input_ids"]),
                   problem=problem, keywords=kw, example=ex, truncated=truncated)


def generator_inputs(generator, tokenizer, batch: Sequence[Encoded], c: torch.Tensor | None = None,
                     permute: bool = False) -> dict:
    """Right-padded inputs_embeds [B, L, D], attention_mask, labels and each problem's start position.
    c [B, T] (selector) gates the candidate-word slot; c=None uses the given keywords instead."""
    emb = generator.get_input_embeddings()
    dev = emb.weight.device
    ids = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)  # noqa: E731
    rows, labels, starts = [], [], []
    for i, b in enumerate(batch):
        if c is None:
            slot = emb(ids(b.keywords))
        else:
            order = torch.randperm(len(b.problem.heads)).tolist() if permute else None
            slot = gated_context_embeddings(emb, *context_slot(b.problem, order), c[i])
        target = b.problem.ids + ([] if b.truncated else [tokenizer.eos_token_id])
        rows.append(torch.cat([emb(ids(b.prefix)), slot, emb(ids(b.suffix)), emb(ids(target))]))
        starts.append(len(b.prefix) + slot.shape[0] + len(b.suffix))
        labels.append([IGNORE_INDEX] * starts[-1] + target)
    embeds, mask = pad_rows(rows)
    lab = torch.full(mask.shape, IGNORE_INDEX, dtype=torch.long, device=dev)
    for i, r in enumerate(rows):
        lab[i, : r.shape[0]] = ids(labels[i])
    return {"inputs_embeds": embeds, "attention_mask": mask, "labels": lab, "starts": starts}


def pad_rows(rows: Sequence[torch.Tensor], left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack [T_i, D] embedding rows into [B, T, D] with zero padding on the right (training) or the left
    (generation: every row's next token in the last column), and the [B, T] attention mask."""
    width = max(r.shape[0] for r in rows)
    embeds = rows[0].new_zeros(len(rows), width, rows[0].shape[1])
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=embeds.device)
    for i, r in enumerate(rows):
        span = slice(width - r.shape[0], width) if left else slice(0, r.shape[0])
        embeds[i, span], mask[i, span] = r, 1
    return embeds, mask


def generator_lm(models: JointModels, batch: Sequence[Encoded], c, config: JointConfig):
    """One teacher-forced generator pass: (logits, sum of Eq. 3 over target tokens, n target tokens, starts)."""
    inp = generator_inputs(models.generator, models.tokenizer, batch, c, config.permute_context)
    dev = inp["inputs_embeds"].device
    with torch.autocast(dev.type, dtype=config.autocast_dtype, enabled=config.autocast_dtype is not None):
        logits = models.generator(inputs_embeds=inp["inputs_embeds"], attention_mask=inp["attention_mask"]).logits
    n_tok = int((inp["labels"][:, 1:] != IGNORE_INDEX).sum())
    return logits, lm_loss(logits, inp["labels"]) * n_tok, n_tok, inp["starts"]


def _selector_q(models: JointModels, batch: Sequence[Encoded]):
    sel = selector_batch([b.problem for b in batch], models.tokenizer.pad_token_id, models.selector.embeddings.device)
    return models.selector(**sel), sel["candidate"]


def phase1_losses(models: JointModels, batch: Sequence[Encoded], config: JointConfig) -> dict[str, torch.Tensor]:
    """Phase 1 objective (Eq. 6): L_LM + beta L_c, gradients into Theta and (via straight-through) Psi."""
    c = kl = None
    if config.context_source == "selector":
        q, cand = _selector_q(models, batch)
        c = sample_straight_through(q)  # forward 0/1, backward dc/dq = 1
        kl = bernoulli_kl(q, config.rho, cand).sum()  # L_c summed over the batch
        n_sel, n_cand = float((c.detach() * cand).sum()), float(cand.sum())
    _, lm_sum, n_tok, _ = generator_lm(models, batch, c, config)
    loss = lm_sum
    if kl is not None and config.use_context_loss:
        loss = loss + config.beta * kl
    out = {"loss": loss / n_tok, "lm": lm_sum / n_tok}
    if kl is not None:
        out |= {"kl": kl / len(batch), "selected_frac": torch.tensor(n_sel / max(n_cand, 1.0))}
    return out


def phase2_losses(models: JointModels, batch: Sequence[Encoded], config: JointConfig) -> dict[str, torch.Tensor]:
    """Phase 2: generator L_LM + alpha L_eq (Eq. 4, relaxed); mwp2eq NLL on the real pairs; selector frozen."""
    c = None
    if config.context_source == "selector":
        with torch.no_grad():
            c = torch.bernoulli(_selector_q(models, batch)[0])  # frozen Psi: plain samples, no gradient
    logits, lm_sum, n_tok, starts = generator_lm(models, batch, c, config)
    loss, out = lm_sum, {"lm": lm_sum / n_tok}
    if config.use_eq_loss:
        # logits[s - 1 + t] predicts problem token t (the EOS prediction is not part of M').
        f = [logits[i, s - 1 : s - 1 + len(b.problem.ids)] for i, (b, s) in enumerate(zip(batch, starts))]
        eq_sum, n_eq = equation_consistency_loss(
            models.mwp2eq, models.tokenizer, f, [b.example.equation for b in batch], tau=config.tau,
            relaxation=config.relaxation, train_mwp2eq=config.mwp2eq_on_generated,
            autocast_dtype=config.autocast_dtype)
        loss = loss + config.alpha * eq_sum
        out["eq"] = eq_sum / max(n_eq, 1)
    out["loss"] = loss / n_tok
    if models.mwp2eq is not None and config.mwp2eq_on_real:
        out["mwp2eq"] = mwp2eq_real_loss(models, batch, config)
    return out


def mwp2eq_real_loss(models: JointModels, batch: Sequence[Encoded], config: JointConfig) -> torch.Tensor:
    """mwp2eq's own objective (Eq. 4 on REAL problems): per-token NLL of E given the batch's real M."""
    real = [encode_example(models.tokenizer, mwp2eq_example(b.example.problem, b.example.equation), config.max_length)
            for b in batch]
    dev = models.mwp2eq.get_input_embeddings().weight.device
    pb = {k: v.to(dev) for k, v in collate(real, models.tokenizer.pad_token_id).items()}
    with torch.autocast(dev.type, dtype=config.autocast_dtype, enabled=config.autocast_dtype is not None):
        p_logits = models.mwp2eq(input_ids=pb["input_ids"], attention_mask=pb["attention_mask"]).logits
    return lm_loss(p_logits, pb["labels"])


def make_optimizers(models: JointModels, lr: float = 5e-5, selector_lr: float | None = None,
                    mwp2eq_lr: float | None = None) -> dict[str, torch.optim.Optimizer]:
    """Adam (AdamW, weight_decay 0) per model; the paper uses lr 5e-5 for "ours"."""
    opt = lambda m, r: torch.optim.AdamW(m.parameters(), lr=r, weight_decay=0.0)  # noqa: E731
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


def phase1_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict,
                config: JointConfig) -> dict[str, float]:
    """One optimisation step of phase 1 (selector + generator). Returns the losses as floats."""
    models.generator.train()
    losses = phase1_losses(models, batch, config)
    losses["loss"].backward()
    trained = {"generator": models.generator}
    if config.context_source == "selector":
        trained["selector"] = models.selector
    _update(trained, optimizers, config.max_grad_norm)
    return {k: float(v.detach()) for k, v in losses.items()}


def mwp2eq_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict,
                config: JointConfig) -> dict[str, float]:
    """mwp2eq alone on the real pairs (phase 1, when the mwp2eq learns beside the generator)."""
    models.mwp2eq.train()
    loss = mwp2eq_real_loss(models, batch, config)
    loss.backward()
    _update({"mwp2eq": models.mwp2eq}, optimizers, config.max_grad_norm)
    return {"mwp2eq": float(loss.detach())}


def phase2_step(models: JointModels, batch: Sequence[Encoded], optimizers: dict,
                config: JointConfig) -> dict[str, float]:
    """One optimisation step of phase 2 (generator + mwp2eq, selector frozen). Returns the losses."""
    if config.use_eq_loss and models.mwp2eq is None:
        raise ValueError("phase 2 with L_eq needs the mwp2eq model (JointModels.mwp2eq is None)")
    models.generator.train()
    trained = {"generator": models.generator}
    losses = phase2_losses(models, batch, config)
    total = losses["loss"]
    if models.mwp2eq is not None:
        models.mwp2eq.train()
        if "mwp2eq" in losses:
            total = total + losses["mwp2eq"]  # disjoint parameters: one backward for both
        trained["mwp2eq"] = models.mwp2eq
    total.backward()
    _update(trained, optimizers, config.max_grad_norm)
    return {k: float(v.detach()) for k, v in losses.items()}


def joint_step(phase: int, models: JointModels, examples: Sequence[JointExample], optimizers: dict,
               config: JointConfig) -> dict[str, float]:
    """Encode `examples` and take one step of `phase` (1 or 2)."""
    batch = [encode_joint(models.tokenizer, ex, config.max_problem_tokens) for ex in examples]
    if phase == 1:
        return phase1_step(models, batch, optimizers, config)
    if phase == 2:
        return phase2_step(models, batch, optimizers, config)
    raise ValueError(f"phase must be 1 or 2, got {phase}")
