"""Each candidate judge's score of every validation reading, computed once and kept in the cache folder
(`<cache>/scores/<name>.json`), with the seconds its validation pass took: the comparison (compare.py) reads them.

- `rule`: the rule's verdict (mwpgen.judge.rule.judged) on the evaluator's greedy parse of each validation problem
  (mwpgen.lm.decoding.predict_equations, as stage train_judge computes it), or on the committed evaluator's parses
  the studies recorded (`stored_rule_scores`) where no evaluator is on the machine;
- `probe`: today's judge as stage train_judge fits it (mwpgen.judge.choose.fit_and_choose's steps: LearnedJudge over
  the first `judge.layer` layers of the evaluator, its head fitted by fit_head on the frozen states of the training
  readings, L2 `judge.l2`); its p alone (the gated form is the table's, from the rule's verdicts);
- `finetune`: a classifier fine-tuned end to end: every decoder layer of the first `layer` ones and the head
  (mwpgen.judge.fit.finetune with `layers` = all of them; the embeddings stay frozen), from a head fitted on a
  seeded sample of the training readings' frozen states, one run per seed, optionally with synthetic readings
  (synthetic.py) added to the training readings.
Test readings are never read: only the `train` and `validation` parts of mwpgen.judge.readings.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from mwpgen.judge.choose import subsample
from mwpgen.judge.fit import finetune, fit_head
from mwpgen.judge.model import LearnedJudge
from mwpgen.judge.rule import judged


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def save_scores(cache: Path, name: str, validation: Sequence[dict], scores: Sequence[float], **details) -> Path:
    path = cache / "scores" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = [[r["equation"], r["problem"]] for r in validation]
    path.write_text(json.dumps({"name": name, "keys": keys, "scores": [float(s) for s in scores], **details}) + "\n",
                    encoding="utf-8")
    return path


def read_scores(path: Path, validation: Sequence[dict]) -> dict:
    """A saved candidate, checked against today's validation readings (the same texts in the same order)."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    if saved["keys"] != [[r["equation"], r["problem"]] for r in validation]:
        raise ValueError(f"{path}: scored other validation readings than data/labels now holds; compute it again")
    return saved


def timed_probabilities(judge: LearnedJudge, rows: Sequence[dict], batch_size: int) -> tuple[list[float], dict]:
    """p of each row and what the pass cost (wall seconds, ms per candidate, the load average around it)."""
    load = load_average()
    start = time.perf_counter()
    p = judge.probabilities([r["problem"] for r in rows], [r["equation"] for r in rows], batch_size)
    seconds = time.perf_counter() - start
    return p, {"seconds": round(seconds, 1), "ms_per_candidate": round(1000 * seconds / max(len(rows), 1), 1),
               "load_average": [load, load_average()]}


def rule_scores(evaluator: Path, validation: Sequence[dict], batch_size: int) -> tuple[list[float], list[str], dict]:
    """The rule's verdicts (1.0 / 0.0), the evaluator's parses, and the parse pass's cost."""
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import load_trained

    model, tokenizer = load_trained(evaluator, "cpu")
    load = load_average()
    start = time.perf_counter()
    parses = predict_equations(model, tokenizer, [r["problem"] for r in validation], batch_size=batch_size)
    seconds = time.perf_counter() - start
    verdicts = [float(judged(p, r["equation"], r["problem"])) for p, r in zip(parses, validation)]
    return verdicts, parses, {"seconds": round(seconds, 1),
                              "ms_per_candidate": round(1000 * seconds / max(len(validation), 1), 1),
                              "load_average": [load, load_average()]}


def probe_scores(backbone: Path, train: Sequence[dict], validation: Sequence[dict], layers: Sequence[int], l2: float,
                 cache: Path) -> dict[int, list[float]]:
    """Today's judge's p alone on each validation reading (fit_and_choose without fine-tuning: fit_head's logistic
    regression on the frozen states of the training readings), one probe per layer of `layers`, from one pass
    (studies/learned_judge's hidden_by_layer, whose states are kept in `cache` between runs)."""
    from studies.learned_judge.compare import hidden_by_layer

    tag = Path(backbone).name
    # one cache file per part: a sample of the training readings reuses the states of every reading already read
    fit = hidden_by_layer(str(backbone), list(layers), list(train), cache, f"states_{tag}_train")
    score = hidden_by_layer(str(backbone), list(layers), list(validation), cache, f"states_{tag}_validation")
    out = {}
    for layer in layers:
        judge = LearnedJudge.from_lm(backbone, 1)  # only its head is used: states come from the pass above
        fit_head(judge, fit[layer], [r["label"] for r in train], l2)
        with torch.no_grad():
            out[layer] = torch.sigmoid(judge.logits(score[layer])).tolist()
    return out


def stored_rule_scores(root: Path, validation: Sequence[dict]) -> tuple[list[float], list[str]]:
    """The rule's verdicts (mwpgen.judge.rule.judged, today's rule) from the committed evaluator's parses as the
    studies that drew the validation readings recorded them: studies/verify_pools/pools_validation.csv
    (`evaluator_parse`) for data/labels/verify_pools, studies/judge_choice/features.jsonl (`exact`: the parse is E,
    with the surface checks recomputed) for data/labels/judge. Used where the fold's evaluator is not on this machine;
    only validation texts are looked up. Returns (verdicts, where each came from)."""
    import csv

    from mwpgen.judge.rule import surface_checks

    wanted = {(r["equation"], r["problem"]) for r in validation}
    with open(root / "studies" / "verify_pools" / "pools_validation.csv", newline="", encoding="utf-8") as f:
        parses = {(r["equation"], r["generated"]): r["evaluator_parse"] for r in csv.DictReader(f)}
    with open(root / "data" / "labels" / "judge" / "problems.csv", newline="", encoding="utf-8") as f:
        texts = {p["uid"]: (p["equation"], p["problem"]) for p in csv.DictReader(f)}
    exact = {}
    for line in (root / "studies" / "judge_choice" / "features.jsonl").read_text(encoding="utf-8").splitlines():
        feature = json.loads(line)
        if texts[feature["uid"]] in wanted:
            exact[texts[feature["uid"]]] = feature["exact"]
    verdicts, origin = [], []
    for r in validation:
        key = (r["equation"], r["problem"])
        if r["source"].endswith("verify_pools") and key in parses:
            verdicts.append(float(judged(parses[key], r["equation"], r["problem"])))
            origin.append("studies/verify_pools/pools_validation.csv")
        elif key in exact:
            c = surface_checks(r["equation"], r["problem"])
            verdicts.append(float(exact[key] and c["numbers_once"] and not c["extra_numbers"] and c["question"]
                                  and c["operation_words"]))
            origin.append("studies/judge_choice/features.jsonl")
        else:
            raise KeyError(f"no stored parse of validation reading {r['where']}: run the rule step with the evaluator")
    return verdicts, origin


def _timed(run, n: int) -> dict:
    load = load_average()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 2), "ms_per_candidate": round(1000 * seconds / max(n, 1), 1),
            "load_average": [load, load_average()]}


def costs(parser: Path, backbone: Path, layers: Sequence[int], rows: Sequence[dict], *, parse_batch: int,
          judge_batch: int, repeats: int, stops_after_equation: bool) -> dict:
    """ms per candidate of the rule's greedy parse (a 30-layer LM of the evaluator's architecture) and of a judge
    over each of `layers` (its weights do not change its cost), timed `repeats` times in turn on the same rows; the
    fastest of each is the figure (the others' load only ever slows a run down). `stops_after_equation`: the parser
    is a stand-in that does not stop after an equation (the pre-trained LM), so its new tokens are capped at the
    longest equation's tokens and EOS, the steps the evaluator takes."""
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(str(parser))
    problems = [r["problem"] for r in rows]
    cap = max(len(tokenizer(" " + r["equation"])["input_ids"]) for r in rows) + 1 if stops_after_equation else 48
    judges = {layer: LearnedJudge.from_lm(backbone, layer) for layer in layers}
    runs: dict[str, list[dict]] = {"parse": [], **{f"L{layer}": [] for layer in layers}}
    for _ in range(repeats):
        runs["parse"].append(_timed(lambda: predict_equations(model, tokenizer, problems, batch_size=parse_batch,
                                                              max_new_tokens=cap), len(rows)))
        for layer, judge in judges.items():
            runs[f"L{layer}"].append(_timed(lambda j=judge: j.probabilities(problems, [r["equation"] for r in rows],
                                                                          judge_batch), len(rows)))
    return {name: {"ms_per_candidate": min(r["ms_per_candidate"] for r in timed), "n": len(rows), "runs": timed,
                   **({"max_new_tokens": cap} if name == "parse" else {})} for name, timed in runs.items()}


def finetune_scores(evaluator: Path, train: Sequence[dict], validation: Sequence[dict], *, layer: int, seed: int,
                    epochs: int, lr: float, batch_size: int, l2: float, warm_start: int,
                    autocast: torch.dtype | None) -> tuple[list[float], dict]:
    """p of each validation reading under a classifier fine-tuned end to end on `train` (all `layer` decoder layers
    and the head), and what it cost: the warm start's frozen pass, the fine-tuning, the validation pass."""
    torch.manual_seed(seed)
    judge = LearnedJudge.from_lm(evaluator, layer)
    warm = subsample(train, warm_start, seed)  # a head to start from, so the first steps do not undo the layers
    start = time.perf_counter()
    fit_head(judge, judge.hidden([r["problem"] for r in warm], [r["equation"] for r in warm], batch_size),
             [r["label"] for r in warm], l2)
    warm_seconds = time.perf_counter() - start
    losses: list[float] = []
    last = [time.perf_counter()]

    def log(epoch: int, step: int, loss: float) -> None:
        losses.append(loss)
        if step % 20 == 0:
            now = time.perf_counter()
            print(f"seed {seed} epoch {epoch} step {step}: loss {sum(losses[-20:]) / 20:.4f} "
                  f"({(now - last[0]) / (20 * batch_size) * 1000:.0f} ms per example, load {load_average()})",
                  flush=True)
            last[0] = now

    start = time.perf_counter()
    finetune(judge, [r["problem"] for r in train], [r["equation"] for r in train], [r["label"] for r in train],
             layers=layer, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, autocast=autocast, log=log)
    train_seconds = time.perf_counter() - start
    p, cost = timed_probabilities(judge, validation, batch_size)
    return p, {**cost, "warm_start_seconds": round(warm_seconds, 1), "train_seconds": round(train_seconds, 1),
               "steps": len(losses), "loss_first_20": round(sum(losses[:20]) / max(1, len(losses[:20])), 4),
               "loss_last_20": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4)}
