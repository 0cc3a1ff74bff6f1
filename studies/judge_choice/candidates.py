"""Judge candidates compared in this study (not the product's judge, mwpgen/judge/rule.py): p(a generated problem
encodes its equation), from features a parser and a reader can measure.

The evaluator's greedy parse (ACC-eq's verdict) is one bit; a judge that can be trusted needs more of what the
parser knows and of what a reader checks first:

- `margin`: log p_Phi(E | M) minus the best log-likelihood of an equation that is NOT E (the other beams of a beam
  search, scored the same way): how much more the parser believes the requested equation than its best alternative.
  A greedy string match says only whether E won; the margin says by how much, and how close the runner-up was.
- `logp_per_token`: log p_Phi(E | M) per equation token.
- `exact`, `equivalent`: the greedy parse is E symbol for symbol, or symbolically.
- `numbers_once`: every numN of E appears in M exactly once; `extra_numbers`: numN tokens in M that E does not use;
  `question`: the last sentence asks something; `operation_words`: for every operator of E the problem has a word
  that commonly signals it (OPERATION_CUES). What a reader checks before solving.
- `classifier`: the consistency classifier's p(yes) (below), where one was trained.

`JudgeModel` is a logistic regression over these features, fitted on labelled problems; its probability is the judge's
p(consistent), and a threshold chosen on development labels turns it into a verdict.

The evaluator never saw a problem that does NOT encode an equation, so it parses many of them into the requested
equation anyway. The consistency classifier is taught the difference: a causal LM fine-tuned on "problem: M equation:
E consistent:" -> yes / no, with the training fold's real pairs as yes and hard negatives made from them as no
(`consistency_examples`: an operator flipped, the operands of - or / swapped, a number of the problem repeated in
place of another, the question of another problem, the equation of another problem).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from mwpgen.data.equations import equivalent, is_num_token
from mwpgen.evaluation.metrics import equation_symbols
from mwpgen.judge.fit import logistic_regression
from mwpgen.judge.rule import equation_logprobs, surface_checks
from mwpgen.lm.decoding import _generation_config, _left_pad
from mwpgen.lm.prompts import LMExample, encode_prompt, mwp2eq_prompt

MARGIN_CAP = 10.0  # a margin beyond this says nothing more (and no alternative at all is this)


@dataclass(frozen=True)
class Features:
    margin: float
    logp_per_token: float
    exact: bool
    equivalent: bool
    numbers_once: bool
    extra_numbers: int
    question: bool
    operation_words: bool
    classifier: float | None = None  # the consistency classifier's p(yes), where one was run

    def vector(self) -> list[float]:
        return [max(-MARGIN_CAP, min(MARGIN_CAP, self.margin)), self.logp_per_token, float(self.exact),
                float(self.equivalent), float(self.numbers_once), float(self.extra_numbers > 0), float(self.question),
                float(self.operation_words), 0.5 if self.classifier is None else self.classifier]


FEATURE_NAMES = ("margin", "logp_per_token", "exact", "equivalent", "numbers_once", "extra_numbers", "question",
                 "operation_words", "classifier")
EVALUATOR_FEATURES = FEATURE_NAMES[:-1]


@torch.no_grad()
def beam_parses(model, tokenizer, problems: Sequence[str], *, beams: int = 5, batch_size: int = 8,
                max_new_tokens: int = 48) -> list[list[str]]:
    """The `beams` best equations of a beam search per problem (whitespace-normalised, best first)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    config = _generation_config(tokenizer, "beam", beams, 1.0, 1.0, max_new_tokens)
    config.num_return_sequences = beams
    out: list[list[str]] = []
    for start in range(0, len(problems), batch_size):
        prompts = [encode_prompt(tokenizer, mwp2eq_prompt(p)) for p in problems[start : start + batch_size]]
        ids, mask = _left_pad(prompts, tokenizer.pad_token_id)
        seqs = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
        texts = tokenizer.batch_decode(seqs[:, ids.shape[1] :], skip_special_tokens=True)
        for i in range(len(prompts)):
            out.append([" ".join(t.split("\n", 1)[0].split()) for t in texts[i * beams : (i + 1) * beams]])
    model.train(was_training)
    return out


def features(model, tokenizer, problems: Sequence[str], equations: Sequence[str], *, beams: int = 5,
             batch_size: int = 8) -> list[Features]:
    """The judge's features of each (problem, equation) pair under the parser `model` (the evaluator)."""
    parses = beam_parses(model, tokenizer, problems, beams=beams, batch_size=batch_size)
    # Score E and every other beam teacher-forced, the same way, so the margin compares like with like.
    others = [[b for b in dict.fromkeys(bs) if b and not equivalent(b, e)] for bs, e in zip(parses, equations)]
    pairs = [(p, e) for p, e in zip(problems, equations)] + [(p, o) for p, os in zip(problems, others) for o in os]
    scores = equation_logprobs(model, tokenizer, [p for p, _ in pairs], [e for _, e in pairs], batch_size=batch_size)
    own, rest = scores[: len(problems)], iter(scores[len(problems) :])
    result = []
    for (logp, n), e, p, bs, os in zip(own, equations, problems, parses, others):
        best_other = max((next(rest)[0] for _ in os), default=None)
        margin = MARGIN_CAP if best_other is None else logp - best_other
        greedy = bs[0] if bs else ""
        result.append(Features(margin=margin, logp_per_token=logp / max(n, 1),
                               exact=equation_symbols(greedy) == equation_symbols(e),
                               equivalent=equivalent(greedy, e), **surface_checks(e, p)))
    return result


@dataclass
class JudgeModel:
    """Logistic regression p(consistent | features) with its features standardised; `threshold` turns it into a
    verdict. `use`: the features it reads (a subset of FEATURE_NAMES)."""

    weights: list[float]
    bias: float
    mean: list[float]
    std: list[float]
    use: tuple[str, ...] = FEATURE_NAMES
    threshold: float = 0.5

    def _x(self, feats: Sequence[Features]) -> torch.Tensor:
        cols = [FEATURE_NAMES.index(u) for u in self.use]
        x = torch.tensor([[f.vector()[c] for c in cols] for f in feats], dtype=torch.float64)
        return (x - torch.tensor(self.mean, dtype=torch.float64)) / torch.tensor(self.std, dtype=torch.float64)

    def probability(self, feats: Sequence[Features]) -> list[float]:
        if not feats:
            return []
        z = self._x(feats) @ torch.tensor(self.weights, dtype=torch.float64) + self.bias
        return torch.sigmoid(z).tolist()

    def accepts(self, feats: Sequence[Features]) -> list[bool]:
        return [p >= self.threshold for p in self.probability(feats)]

    def to_dict(self) -> dict:
        return asdict(self) | {"use": list(self.use)}

    @classmethod
    def from_dict(cls, d: dict) -> JudgeModel:
        return cls(**{**d, "use": tuple(d["use"])})


def fit(feats: Sequence[Features], labels: Sequence[int], use: Sequence[str] = FEATURE_NAMES,
        l2: float = 1.0) -> JudgeModel:
    """Maximum-likelihood logistic regression with an L2 penalty (Newton steps: a convex problem of a few weights)."""
    cols = [FEATURE_NAMES.index(u) for u in use]
    x = torch.tensor([[f.vector()[c] for c in cols] for f in feats], dtype=torch.float64)
    w, mean, std = logistic_regression(x, torch.tensor(list(labels)), l2, steps=50, tolerance=1e-10)
    return JudgeModel(weights=w[:-1].tolist(), bias=float(w[-1]), mean=mean.tolist(), std=std.tolist(), use=tuple(use))


def precision_recall(accepted: Sequence[bool], labels: Sequence[int]) -> dict:
    tp = sum(a and y == 1 for a, y in zip(accepted, labels))
    fp = sum(a and y == 0 for a, y in zip(accepted, labels))
    fn = sum((not a) and y == 1 for a, y in zip(accepted, labels))
    return {"precision": tp / (tp + fp) if tp + fp else math.nan, "recall": tp / (tp + fn) if tp + fn else math.nan,
            "accepted": tp + fp, "tp": tp, "fp": fp, "fn": fn}


def threshold_for_precision(probabilities: Sequence[float], labels: Sequence[int], precision: float) -> float:
    """The lowest threshold whose accepted problems reach `precision` (most recall at that precision); 1.0 if none."""
    best = 1.0
    for t in sorted(set(probabilities), reverse=True):
        pr = precision_recall([p >= t for p in probabilities], labels)
        if pr["accepted"] and pr["precision"] >= precision:
            best = t
    return best


# ---------------------------------------------------------------- the consistency classifier

CLASSIFIER_TEMPLATE = "problem: {problem} equation: {equation} consistent:"
ANSWERS = ("yes", "no")  # targets; encoded, as every target, after a space
_FLIP = {"+": "-", "-": "+", "*": "/", "/": "*"}


def classifier_prompt(problem: str, equation: str) -> str:
    return CLASSIFIER_TEMPLATE.format(problem=problem, equation=equation)


def _flip_operator(equation: str, rng: random.Random) -> str | None:
    symbols = equation.split()
    ops = [i for i, s in enumerate(symbols) if s in _FLIP]
    if not ops:
        return None
    i = rng.choice(ops)
    return " ".join(symbols[:i] + [_FLIP[symbols[i]]] + symbols[i + 1 :])


def _swap_operands(equation: str, rng: random.Random) -> str | None:
    """`a - b` -> `b - a` (or /) where both sides are single tokens: the classic wrong order."""
    symbols = equation.split()
    spots = [i for i in range(1, len(symbols) - 1) if symbols[i] in "-/" and symbols[i - 1] not in ")("
             and symbols[i + 1] not in "()" and symbols[i - 1] != "="]
    if not spots:
        return None
    i = rng.choice(spots)
    symbols[i - 1], symbols[i + 1] = symbols[i + 1], symbols[i - 1]
    return " ".join(symbols)


def _repeat_number(problem: str, equation: str, rng: random.Random) -> str | None:
    """One numN of the equation replaced in the problem by another it already has: a number missing, one repeated."""
    used = sorted({s for s in equation.split() if is_num_token(s)})
    if len(used) < 2:
        return None
    gone, kept = rng.sample(used, 2)
    return re.sub(rf"\b{gone}\b", kept, problem)


def _other_question(problem: str, other: str) -> str | None:
    """The problem's last sentence (its question) replaced by another problem's."""
    mine = re.split(r"(?<=[.!?])\s+", problem.strip())
    theirs = re.split(r"(?<=[.!?])\s+", other.strip())
    if len(mine) < 2 or not theirs[-1].endswith("?") or theirs[-1] == mine[-1]:
        return None
    return " ".join(mine[:-1] + [theirs[-1]])


def _negative_makers(problem: str, equation: str, other: dict, rng: random.Random) -> list:
    """The ways to make a hard negative of (problem, equation), each drawing from `rng` only when called."""
    return [lambda: (problem, _flip_operator(equation, rng)),
            lambda: (problem, _swap_operands(equation, rng)),
            lambda: (_repeat_number(problem, equation, rng), equation),
            lambda: (_other_question(problem, other["text"]), equation),
            lambda: (problem, other["equation"])]


def consistency_examples(records: Sequence[dict], seed: int) -> Callable[[int], list[LMExample]]:
    """`epoch -> examples`: each real (problem, equation) as " yes" and one hard negative made from it as " no",
    a fresh negative per epoch (seeded). Negatives are checked not to be the same equation again."""

    def for_epoch(epoch: int) -> list[LMExample]:
        rng = random.Random(f"{seed}:consistency:{epoch}")
        out = []
        for r in records:
            problem, equation = r["text"], r["equation"]
            out.append(LMExample(classifier_prompt(problem, equation), ANSWERS[0], kind="classifier"))
            other = records[rng.randrange(len(records))]
            makers = _negative_makers(problem, equation, other, rng)
            rng.shuffle(makers)
            for make in makers:
                bad_problem, bad_equation = make()
                if bad_problem and bad_equation and not (bad_problem == problem and equivalent(bad_equation, equation)):
                    out.append(LMExample(classifier_prompt(bad_problem, bad_equation), ANSWERS[1], kind="classifier"))
                    break
        return out

    return for_epoch


@torch.no_grad()
def classifier_probabilities(model, tokenizer, problems: Sequence[str], equations: Sequence[str], *,
                             batch_size: int = 16) -> list[float]:
    """p(yes) against p(no) for the answer after each (problem, equation) prompt."""
    device = next(model.parameters()).device
    yes, no = (tokenizer(" " + a, add_special_tokens=False)["input_ids"][0] for a in ANSWERS)
    was_training = model.training
    model.eval()
    out: list[float] = []
    for start in range(0, len(problems), batch_size):
        prompts = [encode_prompt(tokenizer, classifier_prompt(p, e))
                   for p, e in zip(problems[start : start + batch_size], equations[start : start + batch_size])]
        ids, mask = _left_pad(prompts, tokenizer.pad_token_id)
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits[:, -1].float()
        out += torch.softmax(logits[:, [yes, no]], -1)[:, 0].tolist()
    model.train(was_training)
    return out
