"""Training the learned judge (mwpgen/judge/model.py) on blind readings: fitted on the `train` part
(mwpgen/judge/fit.py), chosen on the `validation` part (mwpgen/judge/readings.py), never shown the `test` part.

The head is fitted once on the frozen backbone's hidden states (an exact, seedless fit). With `finetune_layers` the
top layers are then trained with the head, once per seed, and the seed of best validation AUC is kept. The threshold
that turns p into a verdict is the highest that still accepts `recall` of the validation readings read right: the
same rule for every judge, so its validation precision at that recall is what compares judges. The judge is tried
alone and gated by the rule (it accepts only what the rule accepts, verdicts.gated_scores); the form of higher
validation precision at that recall is kept (a tie keeps it alone).

A learned judge replaces the rule (mwpgen/judge/rule.py) only where it earns it (`against_the_rule`): on the same
validation readings, its precision at its threshold must be above the rule's precision. That is the trade `recall`
sets: where the rule accepts more of the right problems, the learned judge gives some of them up for precision,
which is what a shown, "verified" problem needs. Both figures are in-sample for the learned judge (validation chose
its seed, form and threshold), so a tie or a loss keeps the rule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import torch

from mwpgen.judge.fit import finetune, fit_head
from mwpgen.judge.measure import auc, measure, precision_recall, rounded_figure, threshold_at_recall
from mwpgen.judge.model import LearnedJudge
from mwpgen.judge.verdicts import gated_scores

MIN_PER_CLASS = 2  # a logistic fit and a threshold need readings of both kinds; fewer is an error naming the files


def subsample(rows: Sequence[dict], n: int, seed: int) -> list[dict]:
    """A seeded `n` of `rows` (0: all), each label in proportion and at least MIN_PER_CLASS of each, in their order."""
    if not n or n >= len(rows):
        return list(rows)
    rng = random.Random(seed)
    kept: set[int] = set()
    for label in (0, 1):
        of = [i for i, r in enumerate(rows) if r["label"] == label]
        take = min(len(of), max(MIN_PER_CLASS, round(n * len(of) / len(rows))))
        kept |= set(rng.sample(of, take))
    return [r for i, r in enumerate(rows) if i in kept]


def check_classes(rows: Sequence[dict], part: str, where: Sequence[str]) -> None:
    """One error naming the label sets when a part has too few readings of a class to fit or choose on."""
    right = sum(r["label"] for r in rows)
    wrong = len(rows) - right
    if min(right, wrong) < MIN_PER_CLASS:
        raise ValueError(f"{', '.join(where)}: the {part} readings hold {right} read right and {wrong} read wrong; a "
                         f"judge needs at least {MIN_PER_CLASS} of each (read more of the set, or lower "
                         "judge.max_readings' cut)")


def fit_and_choose(source, train: Sequence[dict], validation: Sequence[dict], rule: Sequence[bool], cfg, *,
                   device: str, autocast: torch.dtype | None = None,
                   log: Callable[[int, int, int, float], None] | None = None
                   ) -> tuple[LearnedJudge, dict, list[float]]:
    """The judge over `source` (a causal LM folder or model spec; LearnedJudge.from_lm) fitted on the `train`
    readings and chosen on the `validation` ones (`rule`: the rule's verdict on each), with params' `judge` section
    `cfg`; its info says what it is (alone or gated by the rule) and how it measured on validation. Also returns its
    score of each validation reading: p, or for a gated judge gated_scores (what against_the_rule compares).
    `log(seed, epoch, step, loss)`: fine-tuning progress."""
    p_train, e_train, y_train = ([r[k] for r in train] for k in ("problem", "equation", "label"))
    p_val, e_val, y_val = ([r[k] for r in validation] for k in ("problem", "equation", "label"))
    states = None
    best: tuple[float, int, LearnedJudge, list[float]] | None = None
    seed_auc: dict[int, float | None] = {}
    for seed in cfg.seeds if cfg.finetune_layers else cfg.seeds[:1]:
        judge = LearnedJudge.from_lm(source, cfg.layer, device)
        if states is None:  # the frozen states are the same for every seed: read once
            states = judge.hidden(p_train, e_train, cfg.batch_size)
        fit_head(judge, states, y_train, cfg.l2)
        if cfg.finetune_layers:
            finetune(judge, p_train, e_train, y_train, layers=cfg.finetune_layers, epochs=cfg.epochs, lr=cfg.lr,
                     batch_size=cfg.batch_size, seed=seed, autocast=autocast,
                     log=None if log is None else lambda epoch, step, loss, s=seed: log(s, epoch, step, loss))
        p = judge.probabilities(p_val, e_val, cfg.batch_size)
        score = auc(p, y_val)
        seed_auc[seed] = rounded_figure(score)
        if best is None or score > best[0]:
            best = (score, seed, judge, p)
    _, seed, judge, p = best
    forms = choose_form(p, rule, y_val, cfg.recall)
    judge.info.gated_by_rule = forms["gated_by_rule"]
    form = "with_rule" if judge.info.gated_by_rule else "alone"
    chosen = forms[form]
    judge.info.threshold = forms["thresholds"][form]  # unrounded: the figures' is rounded for reading
    measured = {"validation": chosen, "gated_by_rule": judge.info.gated_by_rule,
                "forms": {"alone": forms["alone"], "gated_by_rule": forms["with_rule"]}, "recall_target": cfg.recall,
                "seed": seed if cfg.finetune_layers else None,
                "seed_auc": {str(k): v for k, v in seed_auc.items()} if cfg.finetune_layers else {}}
    judge.info.measured = measured
    return judge, measured, gated_scores(p, rule) if judge.info.gated_by_rule else p


MIN_GATED_THRESHOLD = 1e-6  # a gated threshold is above 0, so that what the rule rejects (score 0) is never accepted


def choose_form(p: Sequence[float], rule: Sequence[bool], labels: Sequence[int], recall: float) -> dict:
    """The judge alone (p) and gated by the rule (gated_scores) on validation readings, each at the highest threshold
    reaching `recall` (measure's figures; `thresholds`: each form's, unrounded), and `gated_by_rule`: whether the gated
    form's precision there is higher (a tie keeps the judge alone). Where the rule's own recall is below `recall`, the
    gated form is the rule itself."""
    gated = gated_scores(p, rule)
    thresholds = {"alone": threshold_at_recall(p, labels, recall),
                  "with_rule": max(threshold_at_recall(gated, labels, recall), MIN_GATED_THRESHOLD)}
    alone, with_rule = measure(p, labels, thresholds["alone"]), measure(gated, labels, thresholds["with_rule"])
    return {"alone": alone, "with_rule": with_rule, "thresholds": thresholds,
            "gated_by_rule": _better(with_rule["precision"], alone["precision"])}


def _better(a: float | None, b: float | None) -> bool:
    """a above b, where None (nothing accepted) is below everything."""
    return a is not None and (b is None or a > b)


def against_the_rule(scores: Sequence[float], threshold: float, rule: Sequence[bool], labels: Sequence[int]) -> dict:
    """Whether a learned judge (its score of each validation reading and its threshold) earns the rule's place
    (`rule`: the rule's verdict on the same readings): its precision at its threshold above the rule's precision. The
    figures, the verdict `adopted`, and `reason`, one sentence saying why."""
    if not len(scores) == len(rule) == len(labels):
        raise ValueError(f"{len(scores)} judge scores, {len(rule)} rule verdicts and {len(labels)} labels: one of each "
                         "per validation reading")
    at = _rule_quality(rule, labels)
    learned = precision_recall(scores, labels, threshold)
    figures = {"n": len(labels), "right": int(sum(labels)), "rule_precision": rounded_figure(at["precision"]),
               "rule_recall": rounded_figure(at["recall"]), "rule_accepted": at["accepted"],
               "learned_precision": rounded_figure(learned["precision"]),
               "learned_recall": rounded_figure(learned["recall"]), "learned_accepted": learned["accepted"]}
    if not at["recall"]:  # the rule accepts no right reading: nothing to compare with, and nothing earned
        return {**figures, "adopted": False, "reason": (
            f"the rule accepts none of the {figures['right']} validation readings read right, so there is nothing to "
            "compare the learned judge with; the rule stays (mwpgen/judge/rule.py)")}
    adopted = _better(figures["learned_precision"], figures["rule_precision"])
    compared = (f"on {len(labels)} validation readings the learned judge's precision is {learned['precision']:.3f} at "
                f"recall {learned['recall']:.3f}, the rule's {at['precision']:.3f} at {at['recall']:.3f}")
    return {**figures, "adopted": adopted,
            "reason": f"{compared}: the learned judge replaces the rule" if adopted else
            f"{compared}: the learned judge is not more precise, so the rule stays (mwpgen/judge/rule.py)"}


def _rule_quality(verdicts: Sequence[bool], labels: Sequence[int]) -> dict:
    """Precision (None-free: NaN when nothing is accepted), recall and acceptances of yes/no verdicts."""
    tp = sum(bool(v) and y == 1 for v, y in zip(verdicts, labels))
    accepted, positives = sum(map(bool, verdicts)), sum(labels)
    return {"precision": tp / accepted if accepted else math.nan, "recall": tp / positives if positives else 0.0,
            "accepted": accepted}
