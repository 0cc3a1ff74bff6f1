"""A second round of tuning on reading (issue 47, item 2): RFT again, adding what readers found right among the tuned
model's own candidates.

Round 1 is the stage `tune@rft` (ours tuned on data/labels/corpus: GPT-pre's and ours' candidates for 660 training
equations). Round 2 draws ours-rft's candidates for 200 more training-fold equations (`--skip 660`: none repeats),
reads them blind (studies/tuning/round2, the layout of studies/reading/corpus.py) and tunes again:

    python -m studies.reading.corpus draw models/ours-rft/arithmetic/fold0 --model ours --name ours-rft \
        --split train --skip 660 --n 200 --out studies/tuning/round2
    python -m studies.reading.corpus build --out studies/tuning/round2     # then read labels/batch_*.csv
    python -m studies.tuning.round2 models/ours/arithmetic/fold0 models/ours-rft2/arithmetic/fold0

From `--base` (ours by default: STaR restarts each round from the base model, so the rounds' right candidates are
pooled rather than stacked) with profiles/tuning.yaml's settings, on round 1's readings (as the stage takes them)
plus round 2's. The tuned bundle is a study output, not a DVC stage: it becomes one (`tuning.candidates_from`
accepting ours-rft) only if validation reading says the round gains. Writes <set>/tuned_<model>.json: the data
sizes, steps, time and CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from studies.reading import blind_reading
from studies.reading.corpus import first_reading

ROOT = Path(__file__).resolve().parents[2]
ROUND2 = ROOT / "studies" / "tuning" / "round2"


def set_candidates(folder: Path) -> list[dict]:
    """The read candidates of a corpus-layout set (candidates/*.csv, key.csv, labels/batch_*.csv) as
    mwpgen.data.readings.corpus_candidates gives the corpus's: one dict per read candidate with id, equation,
    context, generated, label, model, source; training-fold equations only."""
    label = first_reading(folder)
    candidates = {}
    for path in sorted((folder / "candidates").glob("*.csv")):
        for row in blind_reading.rows(path):
            candidates[(row["split"], row["id"], row["model"], row["source"], row["sample"])] = row
    out = []
    for line, k in enumerate(blind_reading.rows(folder / "key.csv"), start=2):
        if k["uid"] not in label:
            continue
        if k["split"] != "train":
            raise SystemExit(f"error: {folder / 'key.csv'}:{line}: uid {k['uid']} is a {k['split']!r} problem; "
                             "only training-fold equations may tune")
        c = candidates[(k["split"], k["id"], k["model"], k["source"], k["sample"])]
        out.append({**c, "label": label[k["uid"]], "uid": k["uid"]})
    return out


def tuning_params(profile: Path):
    """params.yaml with the tuning profile applied, in a scratch copy (params.yaml itself is not touched)."""
    from mwpgen.config.profiles import apply_profile
    from mwpgen.config.schema import load_params

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        shutil.copyfile(ROOT / "params.yaml", path)
        apply_profile(path, profile)
        return load_params(path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base", type=Path, help="the bundle tuned from (ours: round 1's base)")
    ap.add_argument("out", type=Path, help="where the tuned bundle goes (e.g. models/ours-rft2/arithmetic/fold0)")
    ap.add_argument("--round2", type=Path, default=ROUND2, help="the read set of the tuned model's own candidates")
    ap.add_argument("--without-round1", action="store_true", help="round 2's readings only (e.g. from ours-rft)")
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles" / "tuning.yaml")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    args = ap.parse_args(argv)

    from mwpgen import registry
    from mwpgen.data.folds import load_fold
    from mwpgen.data.readings import corpus_candidates
    from mwpgen.runtime import cpu_supports_bf16
    from studies.learned_judge.compare import cpu_name
    from tasks.tune import tune_ours_bundle

    params = tuning_params(args.profile)
    cfg, exp = params.tuning, params.experiment
    round1 = [] if args.without_round1 else [r for r in corpus_candidates(ROOT) if r["model"] in cfg.candidates_from]
    round2 = set_candidates(args.round2)
    everything = load_fold(args.data, "arithmetic", 0, 0, 0, exp.seed, validation_size=exp.validation_size)
    training_ids = {r["id"] for r in everything.train}
    readings = [r for r in round1 + round2 if r["id"] in training_ids]
    if len(readings) != len(round1) + len(round2):
        raise SystemExit(f"error: {len(round1) + len(round2) - len(readings)} readings are not of training problems")
    data = load_fold(args.data, "arithmetic", 0, registry.max_train(params, "ours", "arithmetic"),
                     exp.max_test_of("arithmetic"), exp.seed, validation_size=exp.validation_size)
    print(f"round 1: {len(round1)} readings ({sum(r['label'] for r in round1)} right); round 2: {len(round2)} "
          f"({sum(r['label'] for r in round2)} right); tuning {args.base} -> {args.out}", flush=True)
    # .fn: the task's plain function (Prefect's public attribute), so the study runs without a flow or a server.
    result = tune_ours_bundle.fn(params, "rft", args.base, args.out, readings, data.train)
    # models/<name>/<dataset>/fold<k>, wherever the clone is
    summary = {"base": "/".join(args.base.parts[-4:]), "out": "/".join(args.out.parts[-4:]), "round1_readings": len(round1),
               "round1_right": sum(r["label"] for r in round1), "round2_readings": len(round2),
               "round2_right": sum(r["label"] for r in round2),
               **{k: result[k] for k in ("steps", "n", "readings", "right_candidates", "mixed_in", "device")},
               "wall_s": round(result["wall_s"], 1), "final_loss": round(result["history"][-1]["loss"], 4),
               "cpu": cpu_name(), "bf16": cpu_supports_bf16(),
               "tuning": cfg.model_dump()}
    (args.round2 / f"tuned_{args.out.parts[-3]}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
