"""A study variant's test problems, decoded as the `generate` stage decodes ours (tasks/generate.py: the bundle's
selector picks each test problem's context; params.yaml's `generate` settings, greedy by default), written where the
stage writes a model's generations, so that studies/read_models can draw the same seeded test problems from it.

    python -m studies.tuning.generate_test models/ours-rft3/arithmetic/fold0 --name ours-rft3
    python -m studies.read_models.read_models build --models ours-rft3 --n 100 \
        --out data/labels/read_models/tuning_round3

The variant is not a stage: its generations file (results/generations/<name>/arithmetic/fold0.csv) is a study
output, and the test problems it writes only measure (the variant was chosen on validation readings).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mwpgen.config.schema import load_params
from mwpgen.data.folds import load_fold
from mwpgen.io import write_generations

ROOT = Path(__file__).resolve().parents[2]
DATASET, FOLD = "arithmetic", 0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", type=Path, help="the variant's bundle (models/<name>/arithmetic/fold0)")
    ap.add_argument("--name", required=True, help="the variant's name (its generations' folder)")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    args = ap.parse_args(argv)
    from mwpgen.ours.bundle import bundle_settings
    from mwpgen.ours.inputs import JointExample
    from tasks.generate import generate_ours

    try:
        context = bundle_settings(args.bundle)["context"]
    except (FileNotFoundError, ValueError) as e:  # not an ours bundle, or one of another format
        raise SystemExit(f"error: {e}") from None
    if context != "selector":  # heuristic keywords: the generate stage's own fold_keywords path, not this study's
        raise SystemExit(f"error: {args.bundle} takes {context} keywords as context; only a bundle whose selector "
                         "picks its context is decoded here")
    params = load_params(args.params)
    exp = params.experiment
    data = load_fold(args.data, DATASET, FOLD, exp.max_train_of(DATASET), exp.max_test_of(DATASET), exp.seed,
                     validation_size=exp.validation_size)
    start = time.perf_counter()
    # .fn: the task's plain function (Prefect's public attribute), so the study runs without a flow or a server
    generated, contexts = generate_ours.fn(params, args.bundle, [JointExample(r["equation"], r["text"], ())
                                                                  for r in data.test])
    out = ROOT / "results" / "generations" / args.name / DATASET / f"fold{FOLD}.csv"
    write_generations(out, ({"fold": FOLD, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                             "reference": r["text"], "generated": t}
                            for r, c, t in zip(data.test, contexts, generated)))
    print(f"{len(generated)} test problems of {args.name} ({params.generate.decoding}) in "
          f"{time.perf_counter() - start:.0f} s -> {out}")


if __name__ == "__main__":
    main()
