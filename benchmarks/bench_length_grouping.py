"""Length-grouped batches vs the plain seeded order for causal-LM training: padding computed, wall time, and whether
the two train the same (validation loss curves of the real trainer from the same pre-trained weights).

    python -m benchmarks.bench_length_grouping                          # SmolLM2-135M, 30 steps a run
    python -m benchmarks.bench_length_grouping --model tiny --steps 4   # a quick look

`train_causal_lm` (the pipeline's trainer, bf16 autocast where the CPU supports it) runs four times from the same
weights on the same real "problem -> equation" examples (bench_precision.curve_examples: data/processed when
present, else synthetic): plain order with seeds 0 and 1, length-grouped (`mwpgen.batching.seeded_batches` with
lengths) with seeds 0 and 1, in the order plain 0, grouped 0, plain 1, grouped 1 so that load drift hits both kinds.
Each run is one epoch of `--steps` batches; the validation loss on `--val` held-out examples every 5 steps.

Reported per arm: wall seconds, tokens computed (batch x longest row, summed) and real tokens, padding's share. The
noise floor is what a seed changes on its own: |plain seed 0 - plain seed 1| of the validation loss at each
measurement; grouping keeps the results when |grouped - plain| (same seed) stays within that floor.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchmarks.bench_precision import curve_examples
from benchmarks.machine import describe
from mwpgen.batching import seeded_batches
from mwpgen.device import cpu_supports_bf16
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.prompts import encode_example
from mwpgen.lm.training import train_causal_lm
from tests.helpers.tiny_model import tiny_model_dir


def padding(tokenizer, examples, batch_size: int, seed: int, grouped: bool) -> dict:
    """Tokens an epoch computes (each batch padded to its longest row) against the real ones: the trainer's own
    encoding and batching, counted without running the model."""
    lengths = [len(encode_example(tokenizer, ex, 128)["input_ids"]) for ex in examples]
    batches = seeded_batches(len(examples), batch_size, seed, 0, lengths if grouped else None)
    real = sum(lengths)
    computed = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    return {"real_tokens": real, "computed_tokens": computed, "padding_share": round(1 - real / computed, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL, help="tiny, smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--dataset", default="arithmetic")
    ap.add_argument("--steps", type=int, default=30, help="batches per run (one epoch)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--val", type=int, default=64, help="held-out examples for the validation loss")
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--out", type=Path, help="write every number as JSON")
    args = ap.parse_args()

    examples, source = curve_examples(args.dataset, args.steps * args.batch + args.val)
    train, val = examples[: args.steps * args.batch], examples[args.steps * args.batch :]
    tmp = tempfile.TemporaryDirectory()
    spec = (str(tiny_model_dir(Path(tmp.name) / "tiny", [ex.prompt + " " + ex.target for ex in examples]))
            if args.model == "tiny" else DEFAULT_MODEL if args.model == "smollm2-135m" else args.model)
    runs = {}
    for seed in (0, 1):
        for grouped in (False, True):
            name = f"{'grouped' if grouped else 'plain'}_seed{seed}"
            model, tok = load_model_and_tokenizer(spec, args.cache_dir, device="cpu")
            start = time.perf_counter()
            result = train_causal_lm(model, tok, train, epochs=1, batch_size=args.batch, lr=args.lr, max_length=128,
                                     seed=seed, device="cpu", mixed_precision=True, log_every=10**6,
                                     validation=val, eval_every=5, max_steps=0, grad_accum=1, patience=0,
                                     save_every=10**6, length_grouped=grouped)
            runs[name] = {"wall_s": round(time.perf_counter() - start, 1), "precision": result["precision"],
                          "val_loss": [(v["step"], round(v["val_loss"], 4)) for v in result["validations"]],
                          **padding(tok, train, args.batch, seed, grouped)}
            print(name, json.dumps(runs[name]), flush=True)
            del model
    val_of = {k: [v for _, v in r["val_loss"]] for k, r in runs.items()}
    def gap(a: str, b: str, how=max) -> float:  # over the measurements after step 0 (same weights there)
        diffs = [abs(x - y) for x, y in zip(val_of[a][1:], val_of[b][1:])]
        return how(diffs) if how is max else sum(diffs) / len(diffs)
    summary = {
        "machine": describe(), "bf16_autocast": cpu_supports_bf16(), "source": source,
        "steps": args.steps, "batch": args.batch, "n_val": len(val),
        "wall_ratio_grouped_to_plain": round((runs["grouped_seed0"]["wall_s"] + runs["grouped_seed1"]["wall_s"])
                                             / (runs["plain_seed0"]["wall_s"] + runs["plain_seed1"]["wall_s"]), 3),
        "computed_tokens_ratio": round(sum(runs[f"grouped_seed{s}"]["computed_tokens"] for s in (0, 1))
                                       / sum(runs[f"plain_seed{s}"]["computed_tokens"] for s in (0, 1)), 3),
        "seed_noise_val_max_abs": round(gap("plain_seed0", "plain_seed1"), 4),
        "grouping_val_max_abs": round(max(gap("grouped_seed0", "plain_seed0"), gap("grouped_seed1", "plain_seed1")), 4),
        "seed_noise_val_mean_abs": round(gap("plain_seed0", "plain_seed1", how=None), 4),
        "grouping_val_mean_abs": [round(gap(f"grouped_seed{s}", f"plain_seed{s}", how=None), 4) for s in (0, 1)],
        "final_val_loss": {k: v[-1] for k, v in val_of.items()},
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
