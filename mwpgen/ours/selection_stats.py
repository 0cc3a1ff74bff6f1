"""How well the context selector selects: per-problem statistics of its picks, and the generator's loss with the
context it picks (Table 5 and the selector sweep use these)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import torch

from mwpgen.ours.bundle import select_context
from mwpgen.ours.inputs import JointExample, encode_joint
from mwpgen.ours.joint_step import JointModels, generator_lm
from mwpgen.ours.selector import selector_batch


@torch.no_grad()
def selection_stats(models: JointModels, examples: Sequence[JointExample], threshold: float,
                    max_problem_tokens: int | None, batch_size: int = 32) -> dict:
    """Words picked (q > threshold) per problem: median, mean, share of problems with none, and q's range over
    the candidate words; plus each problem's picks."""
    encoded = [encode_joint(models.tokenizer, ex, max_problem_tokens) for ex in examples]
    picks, qs = [], []
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        _, words = select_context(models.selector, chunk, threshold)
        picks += words
        sel = selector_batch([e.problem for e in chunk], 0, models.selector.embeddings.device)
        qs += models.selector(**sel)[sel["candidate"]].float().tolist()
    counts = [len(w) for w in picks]
    return {"words_median": statistics.median(counts), "words_mean": statistics.fmean(counts),
            "none_share": sum(c == 0 for c in counts) / len(counts),
            "q_min": min(qs), "q_mean": statistics.fmean(qs), "q_max": max(qs), "picks": picks}


@torch.no_grad()
def context_lm_loss(models: JointModels, examples: Sequence[JointExample], max_problem_tokens: int,
                    threshold: float, width: int, batch_size: int = 16) -> float:
    """Teacher-forced generator loss per target token with the context the selector picks at inference
    (c = 1{q > threshold}; without a selector, the examples' keywords): ours' validation score."""
    total, n = 0.0, 0
    was_training = models.generator.training
    models.generator.eval()
    for start in range(0, len(examples), batch_size):
        batch = [encode_joint(models.tokenizer, ex, max_problem_tokens)
                 for ex in examples[start : start + batch_size]]
        c = select_context(models.selector, batch, threshold)[0] if models.selector is not None else None
        _, lm_sum, n_tok, _ = generator_lm(models, batch, c, width, permute=False)  # a deterministic score
        total, n = total + float(lm_sum), n + n_tok
    models.generator.train(was_training)
    return total / max(n, 1)
