"""Blind reading of the problems verified generation shows (studies/verify_k/verify_k.py): how often is a shown problem
right, and how often is "verified: yes" right, per K?

    python -m studies.verify_k.read_verify_k build studies/verify_k/verify_judge   # data/labels/verify_judge/
    python -m studies.verify_k.read_verify_k score studies/verify_k/verify_judge   # its reading.{json,md}
    python -m studies.verify_k.read_verify_k build DIR --rows 100 --reading DIR/reading    # read while the rest is made
    python -m studies.verify_k.read_verify_k build DIR --skip 100 --prefix s --reading DIR/reading_rest
    python -m studies.verify_k.read_verify_k score DIR --reading DIR/reading --reading DIR/reading_rest \
        --report DIR/reading_all                                                      # two sets read apart, together

`build` makes a blind reading set (studies/reading/blind_reading.py) of <dir>/verify_k_generations.csv in the reading
folder (`--reading`, default data/labels/verify_judge: the stages that measure a judge read it there): the
same text chosen at two K is read once; its key keeps (K, test id, verified, judged by the evaluator's parse). These
problems were written for TEST equations: they only measure, nothing is tuned on them.

`score` reports, per K: the share of shown problems a reader finds right (with a 95% bootstrap interval over the
test problems), the share the service's judge verified and how often a "verified: yes" is right (its precision),
the same for the judge with the evaluator's parse, and the agreement of the two readings of the overlap.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from studies.reading import blind_reading
from studies.reading.corpus import shape

ROOT = Path(__file__).resolve().parents[2]
READING = ROOT / "data" / "labels" / "verify_judge"  # the committed reading of verify_judge/
RESAMPLES = 1000
KEY = ["k", "id", "verified", "judged_by_evaluator"]


def build(folder: Path, reading: Path, skip: int = 0, prefix: str = "r", rows: int = 0) -> None:
    """The blind set of the problems <folder>/verify_k_generations.csv shows after its first `skip` rows (a set of
    those was built apart: verify_k.py's --first subset), `rows` of them (0: all), with uids `prefix`NNNN (distinct
    per set, so that sets read apart are scored together)."""
    shown = blind_reading.rows(folder / "verify_k_generations.csv")[skip:]
    blind_reading.build(reading, shown[:rows] if rows else shown, KEY, prefix)


def _precision(flags: list[bool], read: list[int]) -> dict:
    accepted = [y for f, y in zip(flags, read) if f]
    return {"accepted": len(accepted), "right": int(sum(accepted)),
            "precision": sum(accepted) / len(accepted) if accepted else None}


def score(reading: Path, *more: Path, report: Path | None = None) -> dict:
    """The figures of one reading set, or of several read apart (uids distinct: build's `prefix`) taken together;
    reading.{json,md} go to `report` (default: the one set's folder)."""
    if more and report is None:
        raise SystemExit("error: several reading sets are scored together into a --report folder; give one")
    out = report or reading
    key, first, second = [], {}, {}
    for folder in (reading, *more):
        k, f, s = blind_reading.labels(folder)
        clash = set(f) & set(first)
        if clash:
            raise SystemExit(f"error: {folder}: uid {sorted(clash)[0]} is in another set too (build each with its "
                             "own --prefix)")
        key, first, second = key + k, first | f, second | s
    out.mkdir(parents=True, exist_ok=True)
    agree = sum(first[u] == y for u, y in second.items())
    rng = np.random.default_rng(blind_reading.SEED)
    per_k = {}
    for k in sorted({int(r["k"]) for r in key}):
        rows = sorted((r for r in key if int(r["k"]) == k), key=lambda r: r["id"])
        read = np.array([first[r["uid"]] for r in rows])
        boot = read[rng.integers(0, len(read), size=(RESAMPLES, len(read)))].mean(axis=1)
        verified = [r["verified"] == "True" for r in rows]
        per_k[k] = {"shown": len(rows), "read_right": float(read.mean()),
                    "read_right_95ci": [float(x) for x in np.percentile(boot, [2.5, 97.5])],
                    "verified_share": sum(verified) / len(rows),
                    "verified": _precision(verified, read.tolist()),
                    "judged_by_evaluator": _precision([r["judged_by_evaluator"] == "True" for r in rows],
                                                      read.tolist())}
    # Where the shown problems are right, by the equation's shape: what limits the share (a shape never right)
    equation = {p["uid"]: p["equation"] for folder in (reading, *more)
                for p in blind_reading.rows(folder / "problems.csv")}
    by_shape: dict[str, dict[int, list[int]]] = {}
    for r in key:
        by_shape.setdefault(shape(equation[r["uid"]]), {}).setdefault(int(r["k"]), []).append(first[r["uid"]])
    by_shape = {s: {k: {"shown": len(v), "right": sum(v)} for k, v in sorted(ks.items())}
                for s, ks in sorted(by_shape.items())}
    result = {"problems_read": len(first), "overlap": len(second), "overlap_agree": agree, "per_k": per_k,
              "by_shape": by_shape}
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}"  # noqa: E731 — a one-line local helper
    lines = [f"Blind reading of the problems verified generation showed ({len(first)} distinct problems; the two "
             f"readings of the {len(second)}-problem overlap agree on {agree}).", "",
             "| K | shown | read right (%) [95% CI] | verified (%) | verified: yes right (%) | judge with the "
             "evaluator's parse: accepted, right (%) |", "|---:|---:|---:|---:|---:|---:|"]
    for k, r in per_k.items():
        lo, hi = r["read_right_95ci"]
        v, e = r["verified"], r["judged_by_evaluator"]
        lines.append(f"| {k} | {r['shown']} | {pct(r['read_right'])} [{pct(lo)}, {pct(hi)}] | "
                     f"{pct(r['verified_share'])} | {pct(v['precision'])} ({v['right']} of {v['accepted']}) | "
                     f"{e['accepted']}, {pct(e['precision'])} |")
    lines += ["", "Read right by the equation's shape (right of shown):", "",
              "| shape | " + " | ".join(f"K = {k}" for k in per_k) + " |", "|---|" + "---:|" * len(per_k)]
    for name, ks in by_shape.items():
        cells = [f"{ks[k]['right']} of {ks[k]['shown']}" if k in ks else "" for k in per_k]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return blind_reading.write_report(out, result, lines)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("command", choices=("build", "score"))
    cli.add_argument("folder", type=Path, help="verify_k.py's --out folder")
    cli.add_argument("--reading", type=Path, action="append", help="the blind reading set's folder (default: "
                     "data/labels/verify_judge); score: several, read apart, are scored together into --report")
    cli.add_argument("--skip", type=int, default=0, help="build: leave out the first N shown problems (a set of "
                     "them was built apart)")
    cli.add_argument("--rows", type=int, default=0, help="build: only the first N shown problems (after --skip)")
    cli.add_argument("--prefix", default="r", help="build: the set's uid prefix (distinct for sets scored together)")
    cli.add_argument("--report", type=Path, help="score: where reading.{json,md} go (default: the one set's folder)")
    args = cli.parse_args()
    readings = args.reading or [READING]
    if args.command == "build":
        if len(readings) > 1:
            raise SystemExit("error: build makes one reading set: give one --reading")
        build(args.folder, readings[0], args.skip, args.prefix, args.rows)
    else:
        score(*readings, report=args.report)


if __name__ == "__main__":
    main()
