"""Blind reading of two models' problems for the same test equations: does one write problems that encode their
equation more often than the other, as readers judge it?

    python -m studies.read_models.read_models build --models gpt_pre --n 100 --out data/labels/read_models/gpt_pre
    python -m studies.read_models.read_models score --out data/labels/read_models/gpt_pre data/labels/read_models/ours \
        --report studies/read_models
    python -m studies.read_models.read_models score --out data/labels/read_models/ours \
        data/labels/read_models/ablation --report data/labels/read_models/ablation
    python -m studies.read_models.read_models cross-build --out data/labels/read_models/ours \
        data/labels/read_models/ablation --n 40 --report data/labels/read_models/ablation/cross
        (then, read: cross-score with the same arguments)

`pool --out <fold 0's sets> <fold 1's set> ... --report <folder>`: ours minus GPT-pre read right on each fold and
pooled over the folds (the mean of the folds' differences, a bootstrap stratified by fold); sets of the same draw
are one fold's (fold 0's GPT-pre and ours were read in sets of their own). The sets of folds
1-4 live in data/labels/read_folds/, not among the judge's reading sets (mwpgen/judge/readings.py): their equations
are fold 0's training equations, which the learned judge was fitted on.

`cross-build` / `cross-score`: sets read by different readers are paired only if their readers judge alike; a fresh
reader reads a seeded sample of each set (none of its overlap) shuffled together, and is compared with each set.

A model's problems may also be read in a set of their own, built when its generations exist (the same seeded draw
of test problems: `build --models ours --out data/labels/read_models/ours`); `score --out A B` scores the sets together.

`build` draws `--n` test problems of a fold by a seeded draw, takes each model's generated problem for them from the
generate stage (results/generations/<model>/<dataset>/fold<k>.csv), and makes one blind reading set of them all
(studies/reading/blind_reading.py: readers see equation and problem only, shuffled across models). These problems were
written for TEST equations: they only measure. The sets live in data/labels/read_models/<set> (the judge's measure_judge
stage reads them, and a stage reads labels from data/ only), with the reports that compare them where `--report` put
each: data/labels/read_models/<set>/reading.md, <set>/vs_*/ and <set>/cross/; only GPT-pre against ours is
studies/read_models/reading.md. `build` and `cross-build` refuse a folder that already holds readings (labels_*.csv).

`score` reports each model's share read right, the difference of every later model from the first with a paired
95% bootstrap interval (the same drawn test problems in both), the judge's and ACC-eq's verdicts against the
readings when the evaluate stage's predictions are there, and the agreement of the two readings of the overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

import numpy as np

from studies.reading import blind_reading

ROOT = Path(__file__).resolve().parents[2]
RESAMPLES = 1000


def build(models: list[str], n: int, dataset: str, fold: int, out: Path, root: Path = ROOT) -> None:
    blind_reading.refuse_if_read(out)  # before anything is read: a read set is never drawn again
    files = {m: root / "results" / "generations" / m / dataset / f"fold{fold}.csv" for m in models}
    missing = [f"{m} ({path.relative_to(root)})" for m, path in files.items() if not path.is_file()]
    if missing:  # e.g. a fold whose generate stages have not all run yet
        raise SystemExit(f"error: no generated problems of {', '.join(missing)}: run {dataset} fold {fold}'s "
                         "generate stages first (or `python -m orchestration.archive pull`)")
    generated = {m: {r["id"]: r for r in blind_reading.rows(path)} for m, path in files.items()}
    ids = sorted(set.intersection(*(set(g) for g in generated.values())))
    drawn = sorted(random.Random(blind_reading.SEED).sample(ids, min(n, len(ids))))
    shown = [{"model": m, "id": i, "equation": generated[m][i]["equation"], "generated": generated[m][i]["generated"]}
             for m in models for i in drawn]
    blind_reading.build(out, shown, ["model", "id"], prefix="m")
    (out / "drawn.json").write_text(json.dumps({"dataset": dataset, "fold": fold, "models": models, "ids": drawn},
                                               indent=1) + "\n", encoding="utf-8")


def _bootstrap_means(matrix: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each column's mean over bootstrap resamples of the rows (test problems), the same rows for every column
    (paired): resample x column."""
    return matrix[rng.integers(0, len(matrix), size=(RESAMPLES, len(matrix)))].mean(axis=1)


def _verdicts(model: str, dataset: str, fold: int, root: Path) -> dict[str, dict]:
    path = root / "results" / "predictions" / model / dataset / f"fold{fold}.jsonl"
    if not path.exists():
        return {}
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def score(outs: list[Path], root: Path = ROOT, report: Path | None = None, baseline: str | None = None) -> dict:
    """The models of `outs`, in order, against `baseline` (default: the first); the report goes to `report` (default:
    the one set, or the sets' common folder)."""
    drawn = [json.loads((out / "drawn.json").read_text(encoding="utf-8")) for out in outs]
    if len({(d["dataset"], d["fold"], tuple(d["ids"])) for d in drawn}) != 1:
        raise SystemExit(f"{', '.join(map(str, outs))}: the sets read different test problems; they cannot be paired")
    models, ids = [m for d in drawn for m in d["models"]], drawn[0]["ids"]
    if baseline is not None:
        if baseline not in models:
            raise SystemExit(f"--baseline {baseline}: not among the sets' models ({', '.join(models)})")
        models.remove(baseline)
        models.insert(0, baseline)
    drawn = drawn[0]
    read, first, second = {}, {}, {}
    for out in outs:
        key, first_here, second_here = blind_reading.labels(out)
        read |= {(r["model"], r["id"]): first_here[r["uid"]] for r in key}
        first |= {f"{out.name}/{u}": y for u, y in first_here.items()}
        second |= {f"{out.name}/{u}": y for u, y in second_here.items()}
    out = report or (outs[0] if len(outs) == 1 else Path(os.path.commonpath(outs)))
    out.mkdir(parents=True, exist_ok=True)
    matrix = np.array([[read[(m, i)] for m in models] for i in ids], dtype=float)  # test problem x model
    boot = _bootstrap_means(matrix, np.random.default_rng(blind_reading.SEED))  # resample x model
    per_model = {}
    for j, m in enumerate(models):
        verdicts = _verdicts(m, drawn["dataset"], drawn["fold"], root)
        entry = {"read_right": float(matrix[:, j].mean()),
                 "read_right_95ci": [float(x) for x in np.percentile(boot[:, j], [2.5, 97.5])]}
        for name in ("judged", "acc_eq"):
            if verdicts and all(i in verdicts and name in verdicts[i] for i in ids):
                accepted = [read[(m, i)] for i in ids if verdicts[i][name]]
                entry[name] = {"accepted": len(accepted), "right": int(sum(accepted)),
                               "precision": sum(accepted) / len(accepted) if accepted else None,
                               "share": len(accepted) / len(ids)}
        if j:
            diff = boot[:, j] - boot[:, 0]
            entry["minus_" + models[0]] = {"mean": float(matrix[:, j].mean() - matrix[:, 0].mean()),
                                           "low": float(np.percentile(diff, 2.5)),
                                           "high": float(np.percentile(diff, 97.5))}
        per_model[m] = entry
    agree = sum(first[u] == y for u, y in second.items())
    result = {"dataset": drawn["dataset"], "fold": drawn["fold"], "test_problems": len(ids), "overlap": len(second),
              "overlap_agree": agree, "models": per_model}
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}"  # noqa: E731 — a one-line local helper
    lines = [f"Blind reading of {len(ids)} seeded test problems of {drawn['dataset']} fold {drawn['fold']} per model "
             f"(sets: {', '.join(str(o) for o in outs)}; the two readings of the {len(second)} overlap problems agree "
             f"on {agree}).", "",
             f"| model | read right (%) [95% CI] | minus {models[0]} [95% CI, paired] | judge: accepted, right (%) | "
             "ACC-eq: accepted, right (%) |", "|---|---:|---:|---:|---:|"]
    for m, e in per_model.items():
        lo, hi = e["read_right_95ci"]
        d = e.get("minus_" + models[0])
        dtext = f"{100 * d['mean']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]" if d else "baseline"
        def cell(v):
            return f"{v['accepted']}, {pct(v['precision'])}" if v else "n/a"
        lines.append(f"| {m} | {pct(e['read_right'])} [{pct(lo)}, {pct(hi)}] | {dtext} | {cell(e.get('judged'))} | "
                     f"{cell(e.get('acc_eq'))} |")
    return blind_reading.write_report(out, result, lines)


def pool(outs: list[Path], report: Path, baseline: str = "gpt_pre", model: str = "ours") -> dict:
    """`model` minus `baseline` read right on each fold's sets and pooled over the folds: the mean of the per-fold
    differences (each fold weighs the same, as Table 2's deltas do), its 95% interval from a bootstrap stratified by
    fold (each resample draws every fold's problems with replacement, the same problems for both models). A fold is
    one set with both models' problems, or several sets of the same draw (fold 0's models were read in sets of their
    own), grouped by the dataset, fold and test problems their drawn.json names."""
    rng = np.random.default_rng(blind_reading.SEED)
    folds, diffs, boots = [], [], []
    for drawn, sets in _sets_by_fold(outs):
        read, overlap, agree = {}, 0, 0
        for out in sets:
            key, first, second = blind_reading.labels(out)
            for r in key:
                if r["model"] in (baseline, model) and (r["model"], r["id"]) in read:
                    raise SystemExit(f"{out}: {r['model']} was read in another set of this fold too; pass one of them")
                read[(r["model"], r["id"])] = first[r["uid"]]
            overlap, agree = overlap + len(second), agree + sum(first[u] == y for u, y in second.items())
        missing = {baseline, model} - {m for m, _ in read}
        if missing:
            raise SystemExit(f"{', '.join(map(str, sets))}: no problems of {', '.join(sorted(missing))} in this fold's "
                             "sets")
        matrix = np.array([[read[(m, i)] for m in (baseline, model)] for i in drawn["ids"]], dtype=float)
        own = _bootstrap_means(matrix, np.random.default_rng(blind_reading.SEED))  # the resamples `score` draws
        diff = own[:, 1] - own[:, 0]
        pooled_draws = _bootstrap_means(matrix, rng)  # the folds' resamples independent of each other
        boots.append(pooled_draws[:, 1] - pooled_draws[:, 0])
        folds.append({"sets": [str(out) for out in sets], "dataset": drawn["dataset"], "fold": drawn["fold"],
                      "test_problems": len(matrix), baseline: float(matrix[:, 0].mean()),
                      model: float(matrix[:, 1].mean()), "difference": float(matrix[:, 1].mean() - matrix[:, 0].mean()),
                      "low": float(np.percentile(diff, 2.5)), "high": float(np.percentile(diff, 97.5)),
                      "overlap": overlap, "overlap_agree": agree})
        diffs.append(folds[-1]["difference"])
    pooled = np.mean(boots, axis=0)
    result = {"baseline": baseline, "model": model, "folds": folds,
              "pooled": {"folds": len(folds), "test_problems": sum(f["test_problems"] for f in folds),
                         baseline: float(np.mean([f[baseline] for f in folds])),
                         model: float(np.mean([f[model] for f in folds])), "difference": float(np.mean(diffs)),
                         "low": float(np.percentile(pooled, 2.5)), "high": float(np.percentile(pooled, 97.5))}}
    pct = lambda x: f"{100 * x:.0f}"  # noqa: E731 — a one-line local helper
    lines = [f"Blind reading per fold, {model} minus {baseline} read right (points, paired 95% bootstrap; pooled: the "
             "mean of the folds' differences, resampled within each fold).", "",
             f"| fold | problems | {baseline} | {model} | difference [95% CI] | overlap agree |",
             "|---|---:|---:|---:|---:|---:|"]
    for f in folds:
        lines.append(f"| {f['dataset']} {f['fold']} | {f['test_problems']} | {pct(f[baseline])} % | {pct(f[model])} % "
                     f"| {points(f['difference'])} [{points(f['low'])}, {points(f['high'])}] | "
                     f"{f['overlap_agree']} of {f['overlap']} |")
    p = result["pooled"]
    lines.append(f"| pooled ({p['folds']} folds) | {p['test_problems']} | {pct(p[baseline])} % | {pct(p[model])} % | "
                 f"**{points(p['difference'])} [{points(p['low'])}, {points(p['high'])}]** | |")
    report.mkdir(parents=True, exist_ok=True)
    return blind_reading.write_report(report, result, lines)


def points(share: float) -> str:
    """A difference of shares in signed whole points, rounded before the sign is written: a bootstrap bound of -1e-17
    (floating point) reads +0, not -0."""
    return f"{round(100 * share):+d}"


def _sets_by_fold(outs: list[Path]) -> list[tuple[dict, list[Path]]]:
    """(the fold's drawn.json, its sets) for each fold the sets read, in the order first given; sets of one fold must
    have read the same drawn test problems (else their models cannot be paired)."""
    groups: dict[tuple, tuple[dict, list[Path]]] = {}
    for out in outs:
        drawn = json.loads((out / "drawn.json").read_text(encoding="utf-8"))
        first, sets = groups.setdefault((drawn["dataset"], drawn["fold"]), (drawn, []))
        if first["ids"] != drawn["ids"]:
            raise SystemExit(f"{sets[0]} and {out}: two sets of {drawn['dataset']} fold {drawn['fold']} read different "
                             "test problems; they cannot be paired")
        sets.append(out)
    return list(groups.values())


CROSS_SEED = 7


def cross_build(outs: list[Path], n: int, out: Path) -> None:
    """A fresh reader's check that the sets' readers judge alike: a seeded `n` problems of each set (none of its
    overlap), shuffled together into one blind set, to be read by someone who read none of them. Never over a
    cross-check that has been read (blind_reading.refuse_if_read)."""
    blind_reading.refuse_if_read(out)
    shown = []
    for s in outs:
        overlap = {r["uid"] for r in blind_reading.rows(s / "overlap.csv")}
        pool = [p for p in blind_reading.rows(s / "problems.csv") if p["uid"] not in overlap]
        shown += [{"set": s.name, "set_uid": p["uid"], "equation": p["equation"], "problem": p["problem"]}
                  for p in random.Random(CROSS_SEED).sample(pool, min(n, len(pool)))]
    random.Random(CROSS_SEED + 1).shuffle(shown)
    for k, r in enumerate(shown):
        r["uid"] = f"c{k:03d}"
    out.mkdir(parents=True, exist_ok=True)
    blind_reading.write_rows(out / "problems.csv", shown, ["uid", "equation", "problem"])
    blind_reading.write_rows(out / "key.csv", shown, ["uid", "set", "set_uid"])
    print(f"{len(shown)} problems from {len(outs)} sets -> {out}")


def cross_score(outs: list[Path], out: Path) -> dict:
    """Per set: how often the fresh reader (out/labels_*.csv) agrees with the set's first reading."""
    firsts = {s.name: blind_reading.labels(s)[1] for s in outs}
    key, fresh, _ = blind_reading.labels(out)
    per_set = {}
    for r in key:
        a = per_set.setdefault(r["set"], {"read": 0, "agree": 0, "first_right": 0, "fresh_right": 0})
        first = firsts[r["set"]][r["set_uid"]]
        a["read"] += 1
        a["agree"] += int(first == fresh[r["uid"]])
        a["first_right"] += first
        a["fresh_right"] += fresh[r["uid"]]
    lines = [f"A fresh reader's reading of {len(key)} problems drawn from {', '.join(per_set)} (none of their overlap "
             "problems), shuffled together, against each set's first reading.", "",
             "| set | read | agree | right, first reading | right, fresh reader |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {v['read']} | {v['agree']} | {v['first_right']} | {v['fresh_right']} |"
              for k, v in per_set.items()]
    return blind_reading.write_report(out, {"sets": per_set}, lines)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("command", choices=("build", "score", "cross-build", "cross-score", "pool"))
    cli.add_argument("--models", nargs="+", default=["gpt_pre", "ours"], help="the first is the baseline")
    cli.add_argument("--n", type=int, default=100, help="test problems drawn (cross-build: problems per set)")
    cli.add_argument("--report", type=Path, help="score: the folder for reading.md / reading.json (default: the one "
                     "set, or the sets' common folder); cross-build, cross-score: the cross-check's own folder")
    cli.add_argument(
        "--baseline", help="score: the model the others are compared with (default: the first set's first)"
    )
    cli.add_argument("--dataset", default="arithmetic")
    cli.add_argument("--fold", type=int, default=0)
    cli.add_argument("--out", type=Path, nargs="+", required=True,
                     help="the set's folder, data/labels/read_models/<set> (build: one; score: one or more, scored "
                     "together)")
    args = cli.parse_args()
    if args.command == "build":
        build(args.models, args.n, args.dataset, args.fold, args.out[0])
    elif args.command == "score":
        score(args.out, report=args.report, baseline=args.baseline)
    elif args.report is None:
        cli.error(f"{args.command} needs --report: the cross-check's (or pooled reading's) own folder")
    elif args.command == "pool":
        pool(args.out, args.report, *args.models[:2])
    elif args.command == "cross-build":
        cross_build(args.out, args.n, args.report)
    else:
        cross_score(args.out, args.report)


if __name__ == "__main__":
    main()
