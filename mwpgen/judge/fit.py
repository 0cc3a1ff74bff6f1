"""Fitting a learned judge's weights on readings (mwpgen/judge/model.py): the head by L2-penalised logistic regression
on standardised hidden states of the frozen backbone (`fit_head`: exact and seedless); then, optionally, the top
decoder layers and the head together (`finetune`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from mwpgen.judge.model import LearnedJudge, decoder_layers


def logistic_regression(x: torch.Tensor, y: torch.Tensor, l2: float, *, steps: int = 100,
                        tolerance: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L2-penalised logistic regression on standardised x [N, F] by Newton steps (at most `steps`, until no weight
    moves by `tolerance`): (weights with the bias last, mean, std). The bias is not shrunk."""
    x = x.double()
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    z = torch.cat([(x - mean) / std, torch.ones(len(x), 1, dtype=torch.float64)], 1)
    y = y.double()
    w = torch.zeros(z.shape[1], dtype=torch.float64)
    penalty = torch.full((z.shape[1],), float(l2), dtype=torch.float64)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = torch.sigmoid(z @ w)
        grad = z.T @ (p - y) + penalty * w
        hess = z.T @ (z * (p * (1 - p)).unsqueeze(1)) + torch.diag(penalty)
        step = torch.linalg.solve(hess, grad)
        w = w - step
        if float(step.abs().max()) < tolerance:
            break
    return w, mean, std


def fit_head(judge: LearnedJudge, states: torch.Tensor, labels: Sequence[int], l2: float) -> LearnedJudge:
    """The head as the L2-penalised logistic regression of the labels on the (standardised) hidden states."""
    w, mean, std = logistic_regression(states, torch.tensor(list(labels)), l2)
    with torch.no_grad():
        judge.mean.copy_(mean.float())
        judge.std.copy_(std.float())
        judge.head.weight.copy_(w[:-1].float()[None])
        judge.head.bias.fill_(float(w[-1]))
    return judge


def finetune(judge: LearnedJudge, problems: Sequence[str], equations: Sequence[str], labels: Sequence[int], *,
             layers: int, epochs: int, lr: float, batch_size: int = 16, seed: int = 0,
             autocast: torch.dtype | None = None, log=None) -> LearnedJudge:
    """Train the top `layers` decoder layers and the head on the readings (binary cross-entropy, unweighted so that p
    stays a probability), starting from the fitted head. The layers below stay frozen."""
    blocks = decoder_layers(judge.backbone)
    for p in judge.backbone.parameters():
        p.requires_grad_(False)
    trainable = [p for block in list(blocks)[len(blocks) - layers:] for p in block.parameters()]
    norm = getattr(judge.backbone, "norm", None) or getattr(judge.backbone, "ln_f", None)
    if norm is not None:
        trainable += list(norm.parameters())
    for p in trainable:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW([{"params": trainable, "lr": lr}, {"params": judge.head.parameters(), "lr": lr * 10}],
                                  weight_decay=0.01)
    y = torch.tensor(list(labels), dtype=torch.float32)
    encoded = judge.encode(problems, equations)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    judge.train()
    step = 0
    for epoch in range(epochs):
        order = list(range(len(encoded)))
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            (rows, ids, mask), = judge.batches([encoded[i] for i in idx], len(idx))
            with torch.autocast(judge.device.type, dtype=autocast, enabled=autocast is not None):
                states = judge.states(ids, mask)
            target = y[[idx[k] for k in rows]].to(judge.device)  # batches() put the rows in length order
            loss = torch.nn.functional.binary_cross_entropy_with_logits(judge.logits(states), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if log is not None:
                log(epoch, step, float(loss.detach()))
    judge.eval()
    judge.info.trained_layers = layers
    return judge
