"""Benchmark (not a test): wall time of one full evaluation of 1,000 generated/reference pairs, split by metric.

Data: real Arithmetic problems (``data/raw/arithmetic/questions.json``, else ``../shared/data/raw/...``), masked with a
THROWAWAY crude regex (numbers -> num1, num2... by first appearance; not the project's preprocessing). References are
the first 1,000 problems; the other 492 act as the "training fold". Hypotheses, seeded:
- 40% perturbed reference: each token dropped with p=0.1 and, with p=0.1, replaced by a random training word;
- 20% exact copy of the reference; 20% copy of a random training problem (not novel); 20% another reference.
Predicted equations equal the reference equation 70% of the time, otherwise another problem's equation.

Run: ``python -m benchmarks.bench_evaluation [--n 1000] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

from mwpgen.evaluation.metrics import evaluate_generations

_ROOT = Path(__file__).resolve().parents[1]
_REL = Path("data") / "raw" / "arithmetic" / "questions.json"
# the project's downloaded copy if present, else the shared mirror it is copied from
RAW = next((p for p in (_ROOT / _REL, _ROOT.parent / "shared" / _REL) if p.exists()), _ROOT / _REL)
_NUM = re.compile(r"\d+(?:[.,]\d+)*")
_EQ_SYMBOL = re.compile(r"num\d+|[A-Za-z]+|\S")


def crude_mask(text: str, equation: str) -> tuple[str, str]:
    """Throwaway: numbers -> numK in order of first appearance in the text; equation symbols space-separated."""
    seen: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        return seen.setdefault(m.group(), f"num{len(seen) + 1}")

    masked = " ".join(_NUM.sub(sub, text).split())
    eq = _NUM.sub(lambda m: seen.get(m.group(), m.group()), equation.replace("X", "x"))
    return masked, " ".join(_EQ_SYMBOL.findall(eq))


def build_pairs(n: int, seed: int) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    problems = json.loads(RAW.read_text(encoding="utf-8"))
    masked = [crude_mask(p["sQuestion"], p["lEquations"][0]) for p in problems]
    refs, ref_eqs = [t for t, _ in masked[:n]], [e for _, e in masked[:n]]
    train = [t for t, _ in masked[n:]]
    vocab = sorted({w for t in train for w in t.split()})
    rng = random.Random(seed)
    hyps: list[str] = []
    for ref in refs:
        r = rng.random()
        if r < 0.4:
            toks = [w if rng.random() >= 0.1 else rng.choice(vocab) for w in ref.split() if rng.random() >= 0.1]
            hyps.append(" ".join(toks))
        elif r < 0.6:
            hyps.append(ref)
        elif r < 0.8:
            hyps.append(rng.choice(train))
        else:
            hyps.append(refs[rng.randrange(n)])
    pred_eqs = [e if rng.random() < 0.7 else ref_eqs[rng.randrange(n)] for e in ref_eqs]
    return hyps, refs, train, pred_eqs, ref_eqs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t = time.perf_counter()
    hyps, refs, train, pred_eqs, ref_eqs = build_pairs(args.n, args.seed)
    print(f"built {len(hyps)} pairs from real Arithmetic problems in {time.perf_counter() - t:.2f} s")

    out = evaluate_generations(hyps, refs, training_texts=train, predicted_equations=pred_eqs,
                               reference_equations=ref_eqs)
    tm = out["timings_s"]
    total = tm["total"]
    rows = [
        ("tokenize (sanitise + PTB JVM)", tm["tokenize"]),
        ("BLEU-4", tm["bleu"]),
        ("ROUGE-L", tm["rouge_l"]),
        ("METEOR JVM start (wait left after the steps above)", tm["meteor_start"]),
        ("METEOR scoring", tm["meteor"]),
        ("METEOR JVM shutdown", tm["meteor_close"]),
        ("ACC-eq + novelty + Dist-3", tm["acc_eq"] + tm["novelty"] + tm["dist_n"]),
    ]
    rows.append(("other (setup, bookkeeping)", total - sum(s for _, s in rows)))
    print(f"\nall metrics, one evaluate_generations call: {total:.2f} s wall")
    for name, secs in rows:
        print(f"  {name:<52} {secs:8.3f} s  {100 * secs / total:5.1f}%")
    print(f"  {'METEOR incl. JVM start + shutdown':<52} "
          f"{tm['meteor_start'] + tm['meteor'] + tm['meteor_close']:8.3f} s  "
          f"{100 * (tm['meteor_start'] + tm['meteor'] + tm['meteor_close']) / total:5.1f}%")
    print("\nvalues: " + ", ".join(f"{k}={out[k]:.4f}" for k in
                                   ("bleu4", "meteor", "rouge_l", "acc_eq", "novelty", "acc_eq_novel", "dist3")))
    print(f"n={out['n']} n_novel={out['n_novel']} n_empty_hypotheses={out['n_empty_hypotheses']} "
          f"n_truncated={out['n_truncated']}")


if __name__ == "__main__":
    main()
