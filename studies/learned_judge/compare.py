"""Which learned judge to use: fitted on the training-fold readings, compared on the validation readings, beside
today's rule (mwpgen/judge/rule.py). Test readings are scored only with `--test CHOICE`, once, after the choice.

    bash scripts/run.sh python -m studies.learned_judge.compare --evaluator models/evaluator/arithmetic/fold0 \
        --cache .cache/learned_judge --out studies/learned_judge/comparison

Candidates (mwpgen/judge/model.py): for each backbone (the fold's evaluator; the pre-trained LM) and each
`--layers`, a probe (logistic regression on the hidden state after that many decoder layers, each `--l2`); with
`--finetune N`, the best probe's top N layers and head trained on the readings, one run per `--seeds`. The rule
needs the evaluator's greedy parse of each validation problem. The learning curve refits the best probe on 25 / 50 /
100 % of the training readings' problems (seeded; the candidates of one problem stay together).

Writes <out>/comparison.json and <out>/comparison.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

import torch

from mwpgen.judge.fit import finetune, fit_head
from mwpgen.judge.measure import auc, precision_at_recall, precision_recall, threshold_at_recall
from mwpgen.judge.model import LearnedJudge, decoder_layers
from studies.learned_judge import labels as readings
from studies.learned_judge import probe as probing

ROOT = Path(__file__).resolve().parents[2]
FRACTIONS = (0.25, 0.5, 1.0)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def calibration_error(p: list[float], y: list[int], bins: int = 10) -> float:
    """Expected calibration error: |mean p - share right| per equal-width bin of p, weighted by the bin's size."""
    total = 0.0
    for b in range(bins):
        idx = [i for i, q in enumerate(p) if b / bins <= q < (b + 1) / bins or (b == bins - 1 and q == 1.0)]
        if idx:
            total += abs(sum(p[i] for i in idx) / len(idx) - sum(y[i] for i in idx) / len(idx)) * len(idx)
    return total / max(len(p), 1)


RULE_RECALL: list[float] = []  # today's judge's recall on the validation readings, once measured


def scores(p: list[float], y: list[int]) -> dict:
    out = {"auc": round(auc(p, y), 4), "precision_at_recall_0.5": round(precision_at_recall(p, y, 0.5), 4),
           "calibration_error": round(calibration_error(p, y), 4)}
    if RULE_RECALL:  # the comparison that decides adoption: precision where the rule stands
        out["precision_at_rule_recall"] = round(precision_at_recall(p, y, RULE_RECALL[0]), 4)
    return out


def hidden_by_layer(folder: str, layers: list[int], rows: list[dict], cache: Path | None, name: str) -> dict:
    """{layer: [N, D]} hidden states of `rows` under the backbone in `folder` (one pass up to the deepest layer).
    With a cache, states already computed for an (equation, problem) are reused and only new rows are embedded."""
    keys = [(r["equation"], r["problem"]) for r in rows]
    path = cache / f"{name}.pt" if cache else None
    known: dict = {}
    if path and path.exists():
        saved = torch.load(path, weights_only=False)
        if saved["layers"] == list(layers):
            known = saved["states"]
    todo = [i for i, k in enumerate(keys) if k not in known]
    if todo:
        fresh = _embed(folder, layers, [rows[i] for i in todo], name)
        for j, i in enumerate(todo):
            known[keys[i]] = fresh[:, j].clone()
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"layers": list(layers), "states": known}, path)
    stacked = torch.stack([known[k] for k in keys], 1) if keys else torch.zeros(len(layers), 0, 1)
    return {layer: stacked[n] for n, layer in enumerate(layers)}


def _embed(folder: str, layers: list[int], rows: list[dict], name: str) -> torch.Tensor:
    """[len(layers), N, D] states of `rows` after each of `layers`, read through the final norm."""
    judge = LearnedJudge.from_lm(folder, max(layers))
    blocks = decoder_layers(judge.backbone)
    # The judge truncated at a layer reads that layer's output through the final norm: so do these states.
    norm = judge.backbone.norm
    captured: dict[int, torch.Tensor] = {}
    hooks = [blocks[layer - 1].register_forward_hook(
        lambda _m, _i, out, layer=layer: captured.__setitem__(
            layer, (out[0] if isinstance(out, tuple) else out)[:, -1])) for layer in layers]
    states = torch.zeros(len(layers), len(rows), judge.backbone.config.hidden_size)
    start = time.perf_counter()
    with torch.no_grad():
        for idx, ids, mask in judge.batches(judge.encode([r["problem"] for r in rows],
                                                         [r["equation"] for r in rows]), 32):
            judge.backbone(input_ids=ids, attention_mask=mask)
            for n, layer in enumerate(layers):
                states[n, idx] = norm(captured[layer]).float()
    for h in hooks:
        h.remove()
    print(f"{name}: {len(rows)} problems embedded in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return states


def probe(x_fit: torch.Tensor, y_fit: list[int], x_score: torch.Tensor, l2: float) -> list[float]:
    return probing.probability(probing.fit(x_fit, torch.tensor(y_fit), l2), x_score).tolist()


def rule_verdicts(evaluator: str, rows: list[dict]) -> list[float]:
    from mwpgen.judge.rule import judged
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import load_trained

    model, tokenizer = load_trained(Path(evaluator), "cpu")
    parses = predict_equations(model, tokenizer, [r["problem"] for r in rows], batch_size=32)
    return [float(judged(p, r["equation"], r["problem"])) for p, r in zip(parses, rows)]


def stored_rule_verdicts() -> dict[tuple[str, str], bool]:
    """Today's judge (mwpgen/judge/rule.py: the evaluator's parse is E and the surface checks pass) on validation
    readings, as the studies that drew them recorded it with the committed evaluator: studies/verify_pools
    (`evaluator_judged`) and studies/judge_choice (`features.jsonl`: exact parse and the checks)."""
    from studies.reading import blind_reading

    out: dict[tuple[str, str], bool] = {}
    pools = ROOT / "data" / "labels" / "verify_pools"
    problems = {p["uid"]: (p["equation"], p["problem"]) for p in blind_reading.rows(pools / "problems.csv")}
    for r in blind_reading.rows(pools / "key.csv"):
        out.setdefault(problems[r["uid"]], r["evaluator_judged"] == "True")
    judge = ROOT / "data" / "labels" / "judge"
    problems = {p["uid"]: (p["equation"], p["problem"]) for p in blind_reading.rows(judge / "problems.csv")}
    for line in (ROOT / "studies" / "judge_choice" / "features.jsonl").read_text().splitlines():
        f = json.loads(line)
        out.setdefault(problems[f["uid"]], f["exact"] and f["numbers_once"] and not f["extra_numbers"]
                       and f["question"] and f["operation_words"])
    return out


def surface_features(rows: list[dict]) -> torch.Tensor:
    """What a reader checks before solving (mwpgen/judge/rule.py's surface checks), as numbers: no parser needed."""
    from mwpgen.judge.rule import surface_checks

    out = []
    for r in rows:
        c = surface_checks(r["equation"], r["problem"])
        out.append([float(c["numbers_once"]), float(c["extra_numbers"] > 0), float(c["question"]),
                    float(c["operation_words"])])
    return torch.tensor(out, dtype=torch.float64)


def logit(p: list[float]) -> torch.Tensor:
    q = torch.tensor(p, dtype=torch.float64).clamp(1e-6, 1 - 1e-6)
    return (q / (1 - q)).log()[:, None]


def group_subset(rows: list[dict], fraction: float, seed: int) -> list[int]:
    groups = sorted({r["group"] for r in rows})
    random.Random(seed).shuffle(groups)
    kept = set(groups[:max(1, round(fraction * len(groups)))])
    return [i for i, r in enumerate(rows) if r["group"] in kept]


def run(args: argparse.Namespace) -> dict:
    train, valid = readings.labelled("train"), readings.labelled("validation")
    y_train, y_valid = [r["label"] for r in train], [r["label"] for r in valid]
    result = {"cpu": cpu_name(), "threads": torch.get_num_threads(),
              "train": {"n": len(train), "right": sum(y_train), "problems": len({r["group"] for r in train})},
              "validation": {"n": len(valid), "right": sum(y_valid), "problems": len({r["group"] for r in valid})},
              "candidates": {}}
    stored = stored_rule_verdicts()
    ruled = [(float(stored[(r["equation"], r["problem"])]), r["label"]) for r in valid
             if (r["equation"], r["problem"]) in stored]
    accepted = precision_recall([v for v, _ in ruled], [y for _, y in ruled], 0.5)
    result["candidates"]["today's judge (the rule, as recorded)"] = {
        "n": len(ruled), "precision": round(accepted["precision"], 4), "recall": round(accepted["recall"], 4)}
    RULE_RECALL[:] = [accepted["recall"]]
    if args.evaluator:
        rule = rule_verdicts(args.evaluator, valid)
        accepted = precision_recall(rule, y_valid, 0.5)
        result["candidates"]["today's judge with this evaluator"] = {
            "precision": round(accepted["precision"], 4), "recall": round(accepted["recall"], 4)}
    backbones = {name: folder for name, folder in (("evaluator", args.evaluator), ("pretrained", args.pretrained))
                 if folder}
    # (train, validation) hidden states of every probed layer, read once per backbone
    states = {name: (hidden_by_layer(folder, args.layers, train, args.cache, f"{name}_train"),
                     hidden_by_layer(folder, args.layers, valid, args.cache, f"{name}_validation"))
              for name, folder in backbones.items()}
    best = (-1.0, None)
    for name, folder in backbones.items():
        h_train, h_valid = states[name]
        for layer in args.layers:
            for l2 in args.l2:
                p = probe(h_train[layer], y_train, h_valid[layer], l2)
                key = f"probe {name} layer {layer} l2 {l2:g}"
                result["candidates"][key] = scores(p, y_valid)
                if result["candidates"][key]["auc"] > best[0]:
                    best = (result["candidates"][key]["auc"], (name, folder, layer, l2))
    if best[1] is None:
        return result
    for name in backbones:  # every probed layer at once: what the layers know together
        if len(args.layers) > 1:
            h_train, h_valid = states[name]
            x_train = torch.cat([h_train[layer] for layer in args.layers], 1)
            x_valid = torch.cat([h_valid[layer] for layer in args.layers], 1)
            for l2 in args.l2:
                key = f"probe {name} layers {'+'.join(map(str, args.layers))} l2 {l2:g}"
                result["candidates"][key] = scores(probe(x_train, y_train, x_valid, l2), y_valid)
    name, folder, layer, l2 = best[1]
    result["best_probe"] = {"backbone": name, "layer": layer, "l2": l2}
    h_train, h_valid = states[name][0][layer], states[name][1][layer]
    curve = {}
    for fraction in FRACTIONS:
        runs = []
        for seed in args.seeds:
            idx = group_subset(train, fraction, seed)
            runs.append(scores(probe(h_train[idx], [y_train[i] for i in idx], h_valid, l2), y_valid) | {"n": len(idx)})
        curve[f"{fraction:g}"] = runs
    result["learning_curve"] = curve
    # The probe's p stacked with the surface checks (a logistic regression over both, fitted on training readings).
    # each training reading's probe p from a probe fitted on the other folds' problems: a stacked model must not
    # learn from probabilities the probe fitted on the very same readings
    oof = probing.cross_validate(h_train, torch.tensor(y_train), [r["group"] for r in train], l2)
    stacked_train = torch.cat([logit(oof), surface_features(train)], 1)
    stacked_valid = torch.cat([logit(probe(h_train, y_train, h_valid, l2)), surface_features(valid)], 1)
    key = f"probe {name} layer {layer} l2 {l2:g} + surface checks"
    result["candidates"][key] = scores(probe(stacked_train, y_train, stacked_valid, 1.0), y_valid)
    if args.finetune_layer:  # fine-tune from another layer than the best probe's (a cheaper backbone)
        layer = args.finetune_layer
        h_train = states[name][0][layer]
    for saved in args.finetuned:  # judges an earlier run fine-tuned and saved (--save), scored again here
        judge = LearnedJudge.load(saved)
        p = judge.probabilities([r["problem"] for r in valid], [r["equation"] for r in valid])
        backbone = judge.info.backbone.rsplit("/", 1)[-1]
        key = f"finetune {backbone} layer {judge.info.layer} top {judge.info.trained_layers}"
        result["candidates"][f"{key} ({saved.name})"] = scores(p, y_valid)
    for seed in args.finetune_seeds if args.finetune else []:
        start = time.perf_counter()
        judge = LearnedJudge.from_lm(folder, layer)
        fit_head(judge, h_train, y_train, l2)
        finetune(
            judge,
            [r["problem"] for r in train],
            [r["equation"] for r in train],
            y_train,
            layers=args.finetune,
            epochs=args.epochs,
            lr=args.lr,
            seed=seed,
            autocast=torch.bfloat16 if args.bf16 else None,
            log=lambda e, step, loss, start=start: (
                step % 50 == 0
                and print(
                    f"epoch {e} step {step} loss {loss:.4f} {time.perf_counter() - start:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            ),
        )
        p = judge.probabilities([r["problem"] for r in valid], [r["equation"] for r in valid])
        if args.save:
            judge.save(args.save / f"seed{seed}")
        result["candidates"][f"finetune {name} layer {layer} top {args.finetune} seed {seed}"] = (
            scores(p, y_valid) | {"seconds": round(time.perf_counter() - start)})
    return result


def measure_once(args: argparse.Namespace) -> dict:
    """The chosen judge (`--backbone`, `--layer`, `--l2`, `--finetune` with the first of `--seeds`) fitted on the
    training readings, its threshold chosen on validation (recall 0.5), scored on the test readings: once."""
    train, valid, test = (readings.labelled(part) for part in ("train", "validation", "test"))
    folder = args.evaluator if args.backbone == "evaluator" else args.pretrained
    if args.load:  # a judge the comparison fitted and saved (--save): fitted on the training readings only
        judge = LearnedJudge.load(args.load)
    else:
        judge = LearnedJudge.from_lm(folder, args.layer)
        states = hidden_by_layer(folder, args.layers, train, args.cache, f"{args.backbone}_train")[args.layer]
        fit_head(judge, states, [r["label"] for r in train], args.l2[0])
    if args.finetune and not args.load:
        finetune(judge, [r["problem"] for r in train], [r["equation"] for r in train],
                 [r["label"] for r in train], layers=args.finetune, epochs=args.epochs, lr=args.lr,
                 seed=args.seeds[0], autocast=torch.bfloat16 if args.bf16 else None)
    out = {"cpu": cpu_name(), "judge": {"backbone": args.backbone, "layer": args.layer, "l2": args.l2[0],
                                        "finetune": args.finetune, "seed": args.seeds[0],
                                        "loaded": str(args.load) if args.load else None}}
    for name, rows in (("validation", valid), ("test", test)):
        p = judge.probabilities([r["problem"] for r in rows], [r["equation"] for r in rows])
        y = [r["label"] for r in rows]
        if name == "validation":
            judge.info.threshold = threshold_at_recall(p, y, 0.5)
        at = precision_recall(p, y, judge.info.threshold)
        out[name] = scores(p, y) | {"n": len(rows), "right": sum(y), "threshold": round(judge.info.threshold, 4),
                                    "precision": round(at["precision"], 4), "recall": round(at["recall"], 4)}
        if name == "test":
            stored = stored_rule_verdicts()
            both = [(q, float(stored[(r["equation"], r["problem"])]), r["label"]) for q, r in zip(p, rows)
                    if (r["equation"], r["problem"]) in stored]
            rule = precision_recall([v for _, v, _ in both], [y for _, _, y in both], 0.5)
            mine = precision_recall([q for q, _, _ in both], [y for _, _, y in both], judge.info.threshold)
            out[name]["where_the_rule_was_recorded"] = {
                "n": len(both), "right": sum(y for _, _, y in both),
                "rule": {"precision": round(rule["precision"], 4), "recall": round(rule["recall"], 4)},
                "learned": {"precision": round(mine["precision"], 4), "recall": round(mine["recall"], 4)},
                **scores([q for q, _, _ in both], [y for _, _, y in both])}
            out[name]["by_source"] = {
                src: scores([q for q, r in zip(p, rows) if r["source"] == src],
                            [r["label"] for r in rows if r["source"] == src])
                | {"n": sum(r["source"] == src for r in rows)} for src in sorted({r["source"] for r in rows})}
    return out


def markdown(result: dict) -> str:
    lines = [f"Fitted on {result['train']['n']} training-fold readings ({result['train']['right']} right, "
             f"{result['train']['problems']} problems); scored on {result['validation']['n']} validation readings "
             f"({result['validation']['right']} right, {result['validation']['problems']} problems). CPU: "
             f"{result['cpu']}, {result['threads']} threads.", "",
             "| candidate | AUC | precision at recall 0.5 | precision at the rule's recall | calibration error | "
             "precision | recall |", "|---|---:|---:|---:|---:|---:|---:|"]
    for key, c in result["candidates"].items():
        lines.append(f"| {key} | {c.get('auc', '')} | {c.get('precision_at_recall_0.5', '')} | "
                     f"{c.get('precision_at_rule_recall', '')} | {c.get('calibration_error', '')} | "
                     f"{c.get('precision', '')} | {c.get('recall', '')} |")
    if "learning_curve" in result:
        lines += ["", "Learning curve (best probe, by share of the training problems; one row per seed):", "",
                  "| share | readings | AUC | precision at recall 0.5 |", "|---:|---:|---:|---:|"]
        for fraction, runs in result["learning_curve"].items():
            lines += [f"| {fraction} | {r['n']} | {r['auc']} | {r['precision_at_recall_0.5']} |" for r in runs]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluator", help="the fold's evaluator folder (a backbone, and the rule's parser)")
    ap.add_argument("--pretrained", help="a pre-trained LM folder as a second backbone")
    ap.add_argument("--layers", type=int, nargs="+", default=[6, 9, 12, 15, 18])
    ap.add_argument("--l2", type=float, nargs="+", default=[10.0, 100.0, 1000.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--finetune", type=int, default=0, help="fine-tune the best probe's top N layers (0: no)")
    ap.add_argument("--finetune-layer", type=int, help="the layer to fine-tune from (default: the best probe's)")
    ap.add_argument("--finetune-seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast while fine-tuning")
    ap.add_argument("--cache", type=Path, help="hidden states kept here between runs")
    ap.add_argument("--save", type=Path, help="fine-tuned judges saved here (<save>/seed<k>)")
    ap.add_argument("--finetuned", type=Path, nargs="*", default=[],
                    help="judges saved by an earlier --save: scored on validation beside the probes")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--test", action="store_true",
                    help="measure the judge named by --backbone/--layer/--l2/--finetune on the test readings, once")
    ap.add_argument("--backbone", choices=("evaluator", "pretrained"), default="pretrained")
    ap.add_argument("--layer", type=int, default=12)
    ap.add_argument("--load", type=Path, help="with --test: a judge saved by --save instead of fitting one")
    args = ap.parse_args(argv)
    if args.test:
        result = measure_once(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "test.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(result, indent=1))
        return
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "comparison.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    (args.out / "comparison.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    main()
