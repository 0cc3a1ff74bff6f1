"""Stage `train_ours`: the paper's method on one (dataset, fold) — context selector q_Psi, generator p_Theta and
a co-trained mwp2eq p_Phi, phase 1 (L_LM + beta L_c) then phase 2 (L_LM + alpha L_eq) (mwpgen/ours/steps.py).

`--variant` trains one Table 4 ablation variant instead (mwpgen/ours/ablation.py), as model `ours-<variant>`.
A killed run resumes from checkpoints/<model>/<dataset>/fold<k>/state.pt (kept outside DVC's outputs, which DVC
deletes before a rerun); the finished model is models/<model>/<dataset>/fold<k>/.
"""

from __future__ import annotations

import random

from prefect import flow, get_run_logger

from flows.common import (DATA, EVALUATOR, PROJECT_ROOT, fold_keywords, fold_name, params_or_exit, record_training,
                          stage_args)
from mwpgen.ours.ablation import VARIANTS, model_name, variant_params
from mwpgen.config import Params
from mwpgen.data.folds import load_fold
from mwpgen.ours.steps import JointExample
from mwpgen.data.keywords import keyword_dropout
from tasks import ours
from tasks.tracking import fold_run

CURVE_COLUMNS = ("step", "loss", "phase", "eq", "kl", "parser")


def training_examples(records, keywords: dict | None, p: float, seed: int):
    """`(phase, epoch) -> examples`: heuristic keywords get fresh dropout + permutation per epoch (as the
    baselines); the selector needs none (it chooses from the problem itself)."""
    def for_epoch(phase: int, epoch: int) -> list[JointExample]:
        rng = random.Random(f"{seed}:{phase}:{epoch}")
        return [JointExample(r["equation"], r["text"],
                             tuple(keyword_dropout(keywords[r["id"]], p, rng=rng)) if keywords else ())
                for r in records]
    return for_epoch


@flow(name="train_ours")
def train_ours(params: Params, dataset: str, fold: int, variant: str | None = None) -> dict:
    log = get_run_logger()
    cfg = variant_params(params.train.ours, variant) if variant else params.train.ours
    model = model_name(variant) if variant else "ours"
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, cfg.max_train or exp.max_train, exp.max_test, exp.seed)
    keywords = fold_keywords(dataset, fold, cfg.context, "train") if cfg.context != "selector" else None
    name = fold_name(model, dataset, fold)
    with fold_run(model, dataset, fold, "train") as run:
        run.params({"model_id": params.train.model, "variant": variant or "full", "n_train": len(data.train),
                    "n_train_full": data.n_train_full, "seed": exp.seed,
                    **{f"ours.{k}": v for k, v in cfg.model_dump().items()}})
        log.info("training %s on %s fold %d: %d examples, context %s, L_eq %s (%s), L_c %s", model, dataset, fold,
                 len(data.train), cfg.context, cfg.equation_loss, cfg.relaxation, cfg.context_loss)
        result = ours.train(
            params, cfg, training_examples(data.train, keywords, params.keywords.dropout, exp.seed),
            PROJECT_ROOT / "models" / name, PROJECT_ROOT / "checkpoints" / name,
            PROJECT_ROOT / "models" / fold_name(EVALUATOR, dataset, fold),
            on_log=lambda rec: run.metrics({f"train_{k}": v for k, v in rec.items() if k not in ("step", "epoch")},
                                           step=rec["step"]))
        history = result["history"]
        s1, s2 = result["steps"]
        metrics = {"steps": s1 + s2, "phase1_steps": s1, "phase2_steps": s2, "n_train": len(data.train),
                   "wall_s": round(result["wall_time_s"], 1), "resumed_from": result["resumed_from"],
                   "device": result["device"]}
        per_epoch = -(-len(data.train) // cfg.batch_size)
        for phase in (1, 2):
            hs = [h for h in history if h["phase"] == phase]
            if not hs:
                continue
            tail = hs[-min(len(hs), params.train.log_every):]
            metrics[f"phase{phase}_step_s"] = round(sum(h["step_s"] for h in hs) / len(hs), 3)
            metrics[f"phase{phase}_min_per_epoch"] = round(metrics[f"phase{phase}_step_s"] * per_epoch / 60, 2)
            for key in ("lm", "eq", "kl", "parser", "selected_frac"):
                vals = [h[key] for h in tail if key in h]
                if vals:
                    metrics[f"phase{phase}_{key}"] = round(sum(vals) / len(vals), 4)
        lines = [",".join(CURVE_COLUMNS)] + [
            ",".join(f"{h[k]:.6f}" if isinstance(h.get(k), float) else str(h.get(k, ""))
                     for k in ("step", "lm", "phase", "eq", "kl", "parser")) for h in history]
        record_training(run, name, metrics, "\n".join(lines) + "\n")
    return metrics


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, variants=tuple(VARIANTS))
    train_ours(params_or_exit(args.params), args.dataset, args.fold, args.variant)
