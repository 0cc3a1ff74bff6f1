"""The rule and a learned probe together: accept a problem only where the rule accepts it (the evaluator's parse is E
and the surface checks pass, mwpgen/judge/rule.py) and the probe's p is at least a threshold. The rule has the parse,
which the probes lack; the probe ranks what the rule accepts. Does the pair reach a precision the rule alone does not?

    bash scripts/run.sh python -m studies.learned_judge.gate models/evaluator/arithmetic/fold0 \
        --cache .cache/learned_judge --out studies/learned_judge/gate

The probe is compare.py's chosen kind (a logistic regression on the evaluator's layer `--layer`, L2 `--l2`), fitted
on the training-fold readings. The gate's threshold is chosen on the validation readings (the highest that keeps
recall 0.5 there); then the gate, the rule and the probe are measured on the test readings, once, with that
threshold. The rule's verdicts come from the same evaluator's greedy parse of every reading (not the verdicts the
studies recorded with earlier evaluators).

Writes <out>.json and <out>.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mwpgen.judge.measure import auc, precision_at_recall, precision_recall, threshold_at_recall
from mwpgen.judge.verdicts import gated_scores
from studies.learned_judge import labels as readings
from studies.learned_judge.compare import cpu_name, hidden_by_layer, probe, rule_verdicts

RECALL = 0.5


def figures(p: list[float], y: list[int], threshold: float) -> dict:
    at = precision_recall(p, y, threshold)
    return {"auc": round(auc(p, y), 4), "precision_at_recall_0.5": round(precision_at_recall(p, y, RECALL), 4),
            "threshold": round(threshold, 4), "precision": round(at["precision"], 4), "recall": round(at["recall"], 4),
            "accepted": at["accepted"]}


def run(args: argparse.Namespace) -> dict:
    start = time.perf_counter()
    parts = {part: readings.labelled(part) for part in ("train", "validation", "test")}
    if args.limit:  # a smoke run of the script itself: its figures mean nothing
        parts = {part: rows[:args.limit] for part, rows in parts.items()}
    states = {part: hidden_by_layer(args.evaluator, [args.layer], rows, args.cache, f"evaluator_{part}")[args.layer]
              for part, rows in parts.items()}
    y = {part: [r["label"] for r in rows] for part, rows in parts.items()}
    p = {part: probe(states["train"], y["train"], states[part], args.l2) for part in ("validation", "test")}
    verdicts = rule_verdicts(args.evaluator, parts["validation"] + parts["test"])  # one load of the parser
    rule = {"validation": verdicts[:len(parts["validation"])], "test": verdicts[len(parts["validation"]):]}
    gate = {part: gated_scores(p[part], rule[part]) for part in ("validation", "test")}
    # thresholds chosen on validation: the rule's is its verdict (0.5 between 0 and 1); the probe's and the gate's
    # the highest that keeps recall 0.5 there
    t_probe = threshold_at_recall(p["validation"], y["validation"], RECALL)
    # where the rule's own recall is below 0.5 the gate cannot reach it: it is then the rule alone
    t_gate = max(threshold_at_recall(gate["validation"], y["validation"], RECALL), 1e-9)
    # the evaluator as models/evaluator/<dataset>/fold<k>, wherever the clone is
    out = {"cpu": cpu_name(), "evaluator": "/".join(Path(args.evaluator).parts[-4:]), "layer": args.layer,
           "l2": args.l2, "counts": {part: {"n": len(rows), "right": sum(y[part])} for part, rows in parts.items()}}
    for part in ("validation", "test"):
        out[part] = {"rule": figures(rule[part], y[part], 0.5), "probe": figures(p[part], y[part], t_probe),
                     "rule and probe": figures(gate[part], y[part], t_gate)}
    out["seconds"] = round(time.perf_counter() - start)
    return out


def markdown(result: dict) -> str:
    c = result["counts"]
    lines = [f"Probe: layer {result['layer']} of {result['evaluator']}, L2 {result['l2']:g}, fitted on "
             f"{c['train']['n']} training-fold readings ({c['train']['right']} right); thresholds chosen on "
             f"{c['validation']['n']} validation readings ({c['validation']['right']} right), measured once on "
             f"{c['test']['n']} test readings ({c['test']['right']} right). CPU: {result['cpu']}.", "",
             "| part | judge | AUC | precision at recall 0.5 | threshold | precision | recall | accepted |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for part in ("validation", "test"):
        for name, f in result[part].items():
            lines.append(f"| {part} | {name} | {f['auc']} | {f['precision_at_recall_0.5']} | {f['threshold']} | "
                         f"{f['precision']} | {f['recall']} | {f['accepted']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluator", help="the fold's evaluator folder: the probe's backbone and the rule's parser")
    ap.add_argument("--layer", type=int, default=12)
    ap.add_argument("--l2", type=float, default=100.0)
    ap.add_argument("--cache", type=Path, help="hidden states kept here between runs")
    ap.add_argument("--limit", type=int, default=0, help="only the first N readings of each part (a smoke run)")
    ap.add_argument("--out", type=Path, required=True, help="writes <out>.json and <out>.md")
    args = ap.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    main()
