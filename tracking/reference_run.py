"""The committed run in MLflow: `python -m tracking.reference_run` logs the results committed at HEAD (metrics/,
results/scores/, reports/, plots/train/) into the local store as the run `reference · <commit>`, so a fresh clone's
MLflow (whose mlflow.db is not in git) holds something to compare a new run with.

The run mirrors a pipeline run: its metrics are metrics/*.json's numbers (report.json's as the report stage logs
them), its children `<model> · <dataset> · fold <k>` hold each fold's scores and training metrics under the names
the stages log (timings as `time/…`, the curve as `train_loss` / `val_loss` by step), and reports/ and metrics/ are
its artifacts. Idempotent: a second call for the same commit skips (`--replace` deletes that run and logs it again);
either way it says which.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from mwpgen.paths import PROJECT_ROOT
from tracking.provenance import git_commit
from tracking.runs import SEP, StageRun, client, curve_rows, experiment_id, fold_run_name, get_or_create_run

KEY = "reference/{commit}"
FOLD_FILE = re.compile(r"(?P<model>[^/]+)/(?P<dataset>[^/]+)/fold(?P<fold>\d+)\.json$")


def flat_numbers(tree: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves by dotted name ({"ours": {"bleu4": x}} -> {"ours.bleu4": x}), what MLflow refuses in a name
    written "_" (as the report stage does)."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = prefix + re.sub(r"[^A-Za-z0-9_\-. :/]", "_", str(key))
        if isinstance(value, dict):
            out.update(flat_numbers(value, f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value
    return out


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def existing(c, commit: str) -> list[str]:
    query = f"tags.`mwpgen.key` = '{KEY.format(commit=commit)}'"
    return [r.info.run_id for r in c.search_runs([experiment_id(c)], query)]


def _delete_tree(c, run_id: str) -> None:
    for child in c.search_runs([experiment_id(c)], f"tags.mlflow.parentRunId = '{run_id}'"):
        _delete_tree(c, child.info.run_id)
    c.delete_run(run_id)


def fold_files(root: Path) -> dict[tuple[str, str, int], dict[str, Path]]:
    """(model, dataset, fold) -> its committed files: scores, train metrics, their timings, the training curve."""
    kinds = {"scores": "results/scores", "train": "metrics/train", "scores_timing": "timing/results/scores",
             "train_timing": "timing/metrics/train"}
    found: dict[tuple[str, str, int], dict[str, Path]] = {}
    for kind, folder in kinds.items():
        for path in sorted((root / folder).glob("*/*/fold*.json")):
            m = FOLD_FILE.search(path.relative_to(root / folder).as_posix())
            if m:
                found.setdefault((m["model"], m["dataset"], int(m["fold"])), {})[kind] = path
    for key, files in found.items():
        curve = root / "plots/train" / key[0] / key[1] / f"fold{key[2]}.csv"
        if curve.exists():
            files["curve"] = curve
    return found


def log_fold(run: StageRun, files: dict[str, Path]) -> None:
    for kind in ("scores", "train"):
        if kind in files:
            data = _read(files[kind])
            timing = {**_read(files[f"{kind}_timing"])} if f"{kind}_timing" in files else {}
            run.metrics({k: v for k, v in flat_numbers(data).items() if k not in ("fold",)})
            run.metrics({f"timing.{k}": v for k, v in flat_numbers(timing).items()})
            run.artifact(files[kind], kind)
    if "curve" in files:
        run.curve(curve_rows(files["curve"].read_text(encoding="utf-8")))


def log_reference(root: Path, commit: str) -> str:
    """Log the committed results of `root` as the reference run of `commit`; returns its run id."""
    c = client()
    parent = get_or_create_run(SEP.join(["reference", commit[:7]]), KEY.format(commit=commit), None,
                               {"mwpgen.stage": "reference", "mwpgen.reference": "true",
                                "mlflow.source.git.commit": commit})
    top = StageRun(c, parent)
    for path in sorted((root / "metrics").glob("*.json")):
        top.metrics(flat_numbers(_read(path)) if path.stem == "report"
                    else {f"{path.stem}.{k}": v for k, v in flat_numbers(_read(path)).items()})
    for folder in ("reports", "metrics"):
        top.artifact(root / folder, folder)
    for (model, dataset, fold), files in sorted(fold_files(root).items()):
        group = get_or_create_run(fold_run_name(model, dataset), f"{model}/{dataset}", parent,
                                  {"mwpgen.model": model, "mwpgen.dataset": dataset})
        run_id = get_or_create_run(fold_run_name(model, dataset, fold), f"{model}/{dataset}/fold{fold}", group,
                                   {"mwpgen.model": model, "mwpgen.dataset": dataset, "mwpgen.fold": str(fold)})
        log_fold(StageRun(c, run_id), files)
        for rid in (run_id, group):
            c.set_terminated(rid, "FINISHED")
    c.set_terminated(parent, "FINISHED")
    return parent


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--replace", action="store_true", help="delete this commit's reference run and log it again")
    cli.add_argument("--root", type=Path, default=PROJECT_ROOT, help=argparse.SUPPRESS)  # tests: a scratch project
    args = cli.parse_args(argv)
    commit = git_commit(args.root)
    if commit is None:
        print(f"error: {args.root} is not a git checkout: no commit to name the reference run by", file=sys.stderr)
        return 2
    c = client()
    name = SEP.join(["reference", commit[:7]])
    if found := existing(c, commit):
        if not args.replace:
            print(f"{name}: already logged (run {found[0]}); skipped (--replace logs it again)")
            return 0
        for run_id in found:
            _delete_tree(c, run_id)
    run_id = log_reference(args.root, commit)
    print(f"{name}: {'replaced' if found else 'logged'} (run {run_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
