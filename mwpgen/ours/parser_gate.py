"""The co-trained mwp2eq p_Phi reaches the evaluator's validation parse accuracy before it drives L_eq.

Phase 1 gives the co-trained parser as many batches as the evaluator gets (`train.ours.mwp2eq_batches_per_step`),
but not the evaluator's checkpoint choice: the evaluator keeps its best measured checkpoint (its
`best_val_parse_accuracy`), the co-trained parser its last. So as phase 2 starts, the parser goes on learning its own
NLL on real pairs, measured every `eval_every` batches on the same validation problems, until its exact parse
accuracy reaches the evaluator's or one more epoch is spent, and keeps its best measured weights. L_eq's gradients
then come from a parser measured to be as good as the one that judges ACC-eq, or the shortfall is on record.
"""

from __future__ import annotations

from collections.abc import Sequence

from mwpgen.batching import seeded_batches
from mwpgen.config.schema import OursTrainParams
from mwpgen.early_stopping import EarlyStopping
from mwpgen.lm.training import parse_accuracy
from mwpgen.ours.inputs import Encoded
from mwpgen.ours.joint_step import JointModels, mwp2eq_step

GATE_STREAM = 7_919  # its own batch order: not one phase 1 or phase 2 draws


def reach_parse_accuracy(models: JointModels, encoded: Sequence[Encoded], problems: Sequence[str],
                         equations: Sequence[str], cfg: OursTrainParams, optimizers: dict, *, target: float,
                         seed: int) -> dict:
    """Train models.mwp2eq on `encoded` real pairs (at most one epoch) until its exact parse accuracy on `problems`
    reaches `target`; it ends with its best measured weights (the first measured, on ties). Returns {"target",
    "start", "accuracy" (the kept weights'), "batches" (trained), "kept_at" (batches behind the kept weights),
    "reached", "measurements": [{"batches", "accuracy"}]}."""
    device = next(models.mwp2eq.parameters()).device

    def measure():
        return parse_accuracy(models.mwp2eq, models.tokenizer, problems, equations, batch_size=16, device=device)

    best = EarlyStopping({"mwp2eq": models.mwp2eq}, patience=0)
    batches = seeded_batches(len(encoded), cfg.batch_size, seed, GATE_STREAM)
    every = cfg.eval_every or len(batches)
    trained, accuracy = 0, measure()
    best.measure(0, 0.0, score=accuracy)
    measurements = [{"batches": 0, "accuracy": accuracy}]
    while accuracy < target and trained < len(batches):
        for index in batches[trained : trained + every]:
            mwp2eq_step(models, [encoded[i] for i in index], optimizers, cfg)
        trained = min(trained + every, len(batches))
        accuracy = measure()
        best.measure(trained, 0.0, score=accuracy)
        measurements.append({"batches": trained, "accuracy": accuracy})
        print(f"co-trained mwp2eq: parse accuracy {accuracy:.3f} after {trained} more batches "
              f"(the evaluator's: {target:.3f})", flush=True)
    best.restore()
    return {"target": target, "start": measurements[0]["accuracy"], "accuracy": best.best_score, "batches": trained,
            "kept_at": best.best_step, "reached": best.best_score >= target, "measurements": measurements}
