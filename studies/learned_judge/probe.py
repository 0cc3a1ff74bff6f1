"""A judge learned from readings, the cheapest way: a frozen LM reads "problem: M equation: E consistent:" and a
logistic regression on its last hidden state at the prompt's end says p(M encodes E). One forward pass per
candidate, no fine-tuning; the LM is the fold's evaluator (it already reads problems into equations) or any
causal LM folder.

    bash scripts/run.sh python -m studies.learned_judge.probe models/evaluator/arithmetic/fold0 \
        --cross-validate validation

`--cross-validate PART` fits and scores on one part's labels by seeded k-fold cross-validation (a preview while
the training corpus is being read); `--fit train --score validation` is the real comparison; `--score test` is
measured once, after the choice.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from studies.judge_choice.candidates import logistic_regression
from studies.judge_choice.compare_judges import auc, precision_at_recall
from studies.learned_judge import labels as readings

PROMPT = "problem: {problem} equation: {equation} consistent:"
ROOT = Path(__file__).resolve().parents[2]


@torch.no_grad()
def embeddings(model, tokenizer, problems: Sequence[str], equations: Sequence[str], *,
               batch_size: int = 16) -> torch.Tensor:
    """[layers + 1, N, D] hidden states at each prompt's last token (left-padded batches: the last column), the
    embedding layer first."""
    from mwpgen.lm.decoding import _left_pad  # the project's own helper, private to its module
    from mwpgen.lm.prompts import encode_prompt

    model.eval()
    device = next(model.parameters()).device
    encoded = [encode_prompt(tokenizer, PROMPT.format(problem=p, equation=e)) for p, e in zip(problems, equations)]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out = torch.zeros(model.config.num_hidden_layers + 1, len(encoded), model.config.hidden_size)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        ids, mask = _left_pad([encoded[i] for i in idx], tokenizer.pad_token_id)
        hidden = model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
        out[:, idx] = torch.stack([h[:, -1] for h in hidden.hidden_states]).float().cpu()
    return out


def fit(x: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weights with bias, mean, std) of the L2-penalised logistic regression on standardised x."""
    return logistic_regression(x, y, l2, steps=100, tolerance=1e-8)


def probability(model: tuple, x: torch.Tensor) -> torch.Tensor:
    w, mean, std = model
    z = torch.cat([(x.double() - mean) / std, torch.ones(len(x), 1, dtype=torch.float64)], 1)
    return torch.sigmoid(z @ w)


def cross_validate(x: torch.Tensor, y: torch.Tensor, groups: Sequence[str], l2: float, folds: int = 5,
                   seed: int = 2021) -> list[float]:
    """Out-of-fold probabilities; every candidate of one dataset problem falls in one fold (no problem is both
    fitted and scored)."""
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold_of = {g: k % folds for k, g in enumerate(names)}
    p = [0.0] * len(y)
    for k in range(folds):
        held = [i for i, g in enumerate(groups) if fold_of[g] == k]
        kept = [i for i, g in enumerate(groups) if fold_of[g] != k]
        model = fit(x[kept], y[kept], l2)
        for i, q in zip(held, probability(model, x[held]).tolist()):
            p[i] = q
    return p


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="a causal LM folder (the fold's evaluator by default choice)")
    ap.add_argument("--cross-validate", choices=readings.PARTS, help="k-fold within one part's labels")
    ap.add_argument("--fit", choices=readings.PARTS, help="fit on this part's labels ...")
    ap.add_argument("--score", choices=readings.PARTS, help="... and score on this one's")
    ap.add_argument("--l2", type=float, nargs="+", default=[1.0, 10.0, 100.0, 1000.0])
    ap.add_argument("--layers", type=int, nargs="+", default=[-1], help="hidden layers to probe (0 = embeddings)")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    ap.add_argument("--cache", type=Path, help="hidden states saved here (torch.save) and read back if present")
    args = ap.parse_args(argv)
    from mwpgen.lm.loading import load_trained

    model, tokenizer = load_trained(args.model, "cpu")
    if args.fit:
        fit_rows, score_rows = readings.labelled(args.fit), readings.labelled(args.score)
        h_fit = embeddings(model, tokenizer, [r["problem"] for r in fit_rows], [r["equation"] for r in fit_rows])
        h_score = embeddings(model, tokenizer, [r["problem"] for r in score_rows],
                             [r["equation"] for r in score_rows])
        y_fit = torch.tensor([r["label"] for r in fit_rows])
        y_score = [r["label"] for r in score_rows]
        result = {"model": str(args.model), "fit": args.fit, "n_fit": len(fit_rows), "right_fit": int(y_fit.sum()),
                  "score": args.score, "n_score": len(score_rows), "right_score": sum(y_score), "by_layer": {}}
        for layer in args.layers:
            for l2 in args.l2:
                p = probability(fit(h_fit[layer], y_fit, l2), h_score[layer]).tolist()
                result["by_layer"][f"{layer} l2={l2:g}"] = {
                    "auc": round(auc(p, y_score), 4),
                    "precision_at_recall_0.5": round(precision_at_recall(p, y_score, 0.5), 4)}
        print(json.dumps(result, indent=1))
        if args.out:
            args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        return
    rows = readings.labelled(args.cross_validate)
    start = time.perf_counter()
    if args.cache and args.cache.exists():
        hidden = torch.load(args.cache)
    else:
        hidden = embeddings(model, tokenizer, [r["problem"] for r in rows], [r["equation"] for r in rows])
        if args.cache:
            torch.save(hidden, args.cache)
    y = torch.tensor([r["label"] for r in rows])
    print(f"{len(rows)} {args.cross_validate} labels ({int(y.sum())} right), embedded in "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    groups = [r["group"] for r in rows]
    result = {"model": str(args.model), "part": args.cross_validate, "n": len(rows), "right": int(y.sum()),
              "problems": len(set(groups)), "by_layer": {}}
    for layer in args.layers:
        for l2 in args.l2:
            p = cross_validate(hidden[layer], y, groups, l2)
            result["by_layer"][f"{layer} l2={l2:g}"] = {
                "auc": round(auc(p, y.tolist()), 4),
                "precision_at_recall_0.5": round(precision_at_recall(p, y.tolist(), 0.5), 4)}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
