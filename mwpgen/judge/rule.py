"""The rule judge: is a generated problem's equation the one it was asked to encode?

`judged` is the verdict of the evaluate stage's "consistency (judged)" column (always this rule: a learned judge's
share is its own column, "consistency (learned)") and of `mwpgen generate --verify` where there is no learned judge
(mwpgen/judge/model.py, stage train_judge, which takes its place there only where it judged validation readings
better): the evaluator's greedy parse is the requested equation, and the problem passes the checks a reader makes
before solving (`surface_checks`). `equation_logprobs` is the parser's log p(E | M), the rank among accepted candidates.
The candidates compared against it (beam margins, fitted judges, a consistency classifier) are in
studies/judge_choice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from mwpgen.data.equations import is_num_token
from mwpgen.evaluation.metrics import equation_symbols
from mwpgen.lm.prompts import IGNORE_INDEX, collate, encode_example, mwp2eq_example

# Words that commonly signal each operation in a word problem (the verb and quantifier cues of the MWP-solving
# literature: gains and totals for +, losses and comparisons for -, rates and groups for * and /), written down before
# any label was read; a problem whose text has none for one of its equation's operators rarely states that operation.
OPERATION_CUES = {
    "+": r"\b(more|total|altogether|together|in all|sum|combined|added|adds|add|plus|gets|got|bought|buys|received|"
         r"found|picked)\b",
    "-": r"\b(left|remain|remaining|gave|give|spent|spend|fewer|less|lost|ate|eaten|sold|took|than|away|used|"
         r"difference)\b",
    "*": r"\b(each|per|every|times|rows of|boxes of|bags of|packs of)\b",
    "/": r"\b(each|per|equally|split|share|shared|divided|among|between|every|evenly|groups)\b",
}

# The judge the evaluate stage applies (its "consistency (judged)" column): chosen on the validation labels by
# studies/judge_choice, where no candidate reached the target precision 0.85.
JUDGE_RULE = "parse = E, surface checks and operation words"


def judged(parse: str, equation: str, problem: str) -> bool:
    """The judge's verdict on one generated problem: the evaluator's greedy parse is the input equation symbol for
    symbol (ACC-eq's match) and the problem passes a reader's surface checks (every numN of E once, no other numN,
    a question at the end, a word that signals each of E's operations)."""
    checks = surface_checks(equation, problem)
    return (equation_symbols(parse) == equation_symbols(equation) and checks["numbers_once"]
            and not checks["extra_numbers"] and checks["question"] and checks["operation_words"])


def judge_predictions(predictions: list[dict]) -> float:
    """Add the judge's verdict ("judged") to each prediction record of the evaluate stage (id, equation, generated,
    parsed, ...) and return the share it accepts: the "consistency (judged)" score."""
    for p in predictions:
        p["judged"] = judged(p["parsed"], p["equation"], p["generated"])
    return sum(p["judged"] for p in predictions) / max(len(predictions), 1)


def surface_checks(equation: str, problem: str) -> dict:
    """What a reader checks before solving: each numN of the equation once in the problem, no other numN, a question,
    a word that signals each of the equation's operations."""
    wanted = [s for s in equation.split() if is_num_token(s)]
    present = re.findall(r"\bnum\d+\b", problem)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", problem.strip()) if s]
    lowered = problem.lower()
    return {"numbers_once": all(present.count(n) == 1 for n in set(wanted)),
            "extra_numbers": sum(1 for n in present if n not in wanted),
            "question": bool(sentences) and sentences[-1].rstrip().endswith("?"),
            "operation_words": all(re.search(OPERATION_CUES[op], lowered)
                                   for op in set(equation.split()) & set(OPERATION_CUES))}


@torch.no_grad()
def equation_logprobs(model, tokenizer, problems: Sequence[str], equations: Sequence[str], *, batch_size: int = 16,
                      max_length: int = 256) -> list[tuple[float, int]]:
    """(sum of log p_Phi(E | M) over E's tokens and EOS, their count) per pair, teacher-forced as mwp2eq is trained."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    encoded = [encode_example(tokenizer, mwp2eq_example(p, e), max_length) for p, e in zip(problems, equations)]
    out: list[tuple[float, int]] = []
    for start in range(0, len(encoded), batch_size):
        batch = {k: v.to(device) for k, v in collate(encoded[start : start + batch_size],
                                                     tokenizer.pad_token_id).items()}
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
        logp = torch.log_softmax(logits[:, :-1], -1)
        labels = batch["labels"][:, 1:]
        mask = labels != IGNORE_INDEX
        picked = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
        out += [(float(s), int(n)) for s, n in zip(picked.sum(-1), mask.sum(-1))]
    model.train(was_training)
    return out
