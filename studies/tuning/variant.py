"""A tuning variant outside the `tune` stage, for studies: ours' generator tuned by RFT or DPO (mwpgen/tuning.py,
through the stage's own task) with other settings or more readings than the stage uses, chosen on validation reading
before anything becomes a stage.

    python -m studies.tuning.variant models/ours/arithmetic/fold0 models/ours-rft2/arithmetic/fold0 \
        --add-set corpus_round2                                          # round 2: both rounds' readings
    python -m studies.tuning.variant models/ours-rft/arithmetic/fold0 models/ours-rft2s/arithmetic/fold0 \
        --add-set corpus_round2 --without-corpus                         # round 2, stacked on ours-rft
    python -m studies.tuning.variant models/ours/arithmetic/fold0 models/ours-dpo-lr1e-5/arithmetic/fold0 \
        --method dpo --lr 1e-5                                            # DPO at a lower rate

Settings are params.yaml's `tuning` section unless given. The readings are data/labels/corpus's plus any `--add-set`'s
(another reading corpus under data/labels, mwpgen.judge.readings.CORPORA: e.g. corpus_round2, ours-rft's own candidates
for 200 more training-fold equations), those written by a model of `tuning.candidates_from`.
Only training-fold equations tune. Writes tuned_<model>.json (the data sizes,
steps, time, CPU and settings) beside the bundle's name in studies/tuning/variants/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from mwpgen.judge.readings import CORPORA, LABELS

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "studies" / "tuning" / "variants"


def tuning_params(profile: Path | None):
    """params.yaml, with `profile` applied in a scratch copy when one is given (params.yaml itself is not touched)."""
    from mwpgen.config.profiles import apply_profile
    from mwpgen.config.schema import load_params

    if profile is None:
        return load_params(ROOT / "params.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        shutil.copyfile(ROOT / "params.yaml", path)
        apply_profile(path, profile)
        return load_params(path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", type=Path, help="the bundle tuned from (e.g. models/ours/arithmetic/fold0)")
    ap.add_argument("out", type=Path, help="where the tuned bundle goes (models/<name>/arithmetic/fold0)")
    ap.add_argument("--method", choices=("rft", "dpo"), default="rft")
    ap.add_argument("--lr", type=float, help="the learning rate (default: the profile's tuning.lr)")
    ap.add_argument("--beta", type=float, help="DPO's beta (default: the profile's tuning.beta)")
    ap.add_argument("--add-set", action="append", default=[], choices=CORPORA[1:],
                    help="another reading corpus under data/labels whose readings tune too (e.g. corpus_round2)")
    ap.add_argument("--without-corpus", action="store_true", help="the --add-set readings only")
    ap.add_argument("--profile", type=Path, help="a profile applied to params.yaml first (default: none)")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    args = ap.parse_args(argv)

    from mwpgen import registry
    from mwpgen.data.folds import load_fold
    from mwpgen.device import cpu_supports_bf16
    from mwpgen.judge.readings import tuning_candidates
    from studies.learned_judge.compare import cpu_name
    from tasks.tune import tune_ours_bundle

    params = tuning_params(args.profile)
    changes = {k: v for k, v in (("lr", args.lr), ("beta", args.beta)) if v is not None}
    # validated as params.yaml's own values are (a rate of 0 or a negative beta stops here)
    params = params.model_copy(update={"tuning": type(params.tuning).model_validate(
        params.tuning.model_dump() | changes)})
    cfg, exp = params.tuning, params.experiment
    corpora = ([] if args.without_corpus else ["corpus"]) + args.add_set
    readings = tuning_candidates(ROOT, corpora, cfg.candidates_from)
    everything = load_fold(args.data, "arithmetic", 0, 0, 0, exp.seed, validation_size=exp.validation_size)
    training_ids = {r["id"] for r in everything.train}
    outside = sum(r["id"] not in training_ids for r in readings)
    if outside:
        raise SystemExit(f"error: {outside} readings are not of training problems")
    data = load_fold(args.data, "arithmetic", 0, registry.max_train(params, "ours", "arithmetic"),
                     exp.max_test_of("arithmetic"), exp.seed, validation_size=exp.validation_size)
    print(f"{', '.join(corpora)}: {len(readings)} readings ({sum(r['label'] for r in readings)} right) of "
          f"{', '.join(cfg.candidates_from)}; {args.method} {args.base} -> {args.out}", flush=True)
    # .fn: the task's plain function (Prefect's public attribute), so the study runs without a flow or a server.
    result = tune_ours_bundle.fn(params, args.method, args.base, args.out, readings, data.train)
    # models/<name>/<dataset>/fold<k>, wherever the clone is
    summary = {"base": "/".join(args.base.parts[-4:]), "out": "/".join(args.out.parts[-4:]), "method": args.method,
               "corpora": [str(LABELS / name) for name in corpora], "read": len(readings),
               "read_right": sum(r["label"] for r in readings),
               **{k: result[k] for k in ("steps", "n", "readings", "right_candidates", "mixed_in", "pairs", "device")
                  if k in result},
               "wall_s": round(result["wall_s"], 1), "final_loss": round(result["history"][-1]["train_loss"], 4),
               "cpu": cpu_name(), "bf16": cpu_supports_bf16(),
               "tuning": cfg.model_dump()}
    RECORDS.mkdir(parents=True, exist_ok=True)
    (RECORDS / f"tuned_{args.out.parts[-3]}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
