"""Stage `ablate`: one Table 4 variant of ours on one (dataset, fold) — train, generate, evaluate — with the
same flows as the full model, as model `ours-<variant>` (mwpgen/ours/ablation.py says what each variant switches).

All variants: python -m orchestration.pipeline --profile ablation   (profiles/ablation.yaml; the report adds Table 4)
"""

from __future__ import annotations

from prefect import flow

from flows.common import params_or_exit, run_stage, stage_args
from flows.evaluate import evaluate
from flows.generate import generate
from flows.train_ours import train_ours
from mwpgen.config.schema import Params
from mwpgen.registry import ABLATION_VARIANTS, ablation_model


@flow(name="ablate")
def ablate(params: Params, variant: str, dataset: str, fold: int) -> dict:
    model = ablation_model(variant)
    trained = train_ours(params, dataset, fold, variant)
    generate(params, model, dataset, fold)
    return {"train": trained, "scores": evaluate(params, model, dataset, fold)}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, variants=ABLATION_VARIANTS)
    run_stage(ablate, params_or_exit(args.params), args.variant, args.dataset, args.fold)
