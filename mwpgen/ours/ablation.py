"""The paper's Table 4 (ablation) as settings of `train.ours`: each variant is "ours" with some switches
changed, trained, generated and evaluated by the same code as the full model.

Table 4 has three groups; rows that are the same training run appear once here with several labels:

  equation consistency alone (heuristic noun context, no selector):  L_eq (softmax), L_eq (Gumbel-softmax)
  context alone (no L_eq):  keyword TF-IDF, keyword noun+pronoun, context selection (= full model w/o L_eq)
  full model ablations:  w/o L_c, w/o L_eq, w/o both, full model

"keyword, noun+pronoun" trains GPT-pre's objective (L_LM with noun keywords) through the joint trainer; its prompt
differs from GPT-pre's only by the zero vectors that fill ours' fixed-width context slot (mwpgen/ours/inputs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mwpgen.config.schema import OursTrainParams
from mwpgen.registry import ABLATION_VARIANTS

# variant -> (overrides of train.ours, Table 4 row labels it answers (mwpgen.paper.TABLE4 keys))
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "eq_softmax": ({"context": "noun", "relaxation": "softmax", "equation_loss": True}, ("L_eq (softmax)",)),
    "eq_gumbel": ({"context": "noun", "relaxation": "gumbel", "equation_loss": True}, ("L_eq (Gumbel-softmax)",)),
    "tfidf": ({"context": "tfidf", "equation_loss": False}, ("keyword, TF-IDF",)),
    "noun": ({"context": "noun", "equation_loss": False}, ("keyword, noun+pronoun",)),
    "selector": ({"context": "selector", "context_loss": True, "equation_loss": False},
                 ("context selection", "full model w/o L_eq")),
    "no_context_loss": ({"context": "selector", "context_loss": False, "equation_loss": True},
                        ("full model w/o L_c",)),
    "no_both": ({"context": "selector", "context_loss": False, "equation_loss": False}, ("full model w/o both",)),
    "full": ({}, ("full model",)),
}

TABLE4_ROWS = ("L_eq (softmax)", "L_eq (Gumbel-softmax)", "keyword, TF-IDF", "keyword, noun+pronoun",
               "context selection", "full model w/o L_c", "full model w/o L_eq", "full model w/o both", "full model")


def check_variants() -> None:
    """The registry's variant names and the switches defined here must be the same list (a unit test calls this:
    a module-level assert would vanish under `python -O`)."""
    if tuple(VARIANTS) != ABLATION_VARIANTS:
        raise AssertionError(f"registry.ABLATION_VARIANTS {ABLATION_VARIANTS} != ablation.VARIANTS {tuple(VARIANTS)}")


def variant_of(model: str, trained: Sequence[str] = ()) -> str | None:
    """The Table 4 variant a model's scores answer; None for models outside Table 4. The default "ours" is the
    full model. GPT-pre trains the "keyword, noun+pronoun" objective (L_LM with noun keywords), so it
    answers that row unless the `noun` variant itself was trained (listed in `trained`)."""
    if model == "ours":
        return "full"
    if model == "gpt_pre":
        return None if "noun" in trained else "noun"
    if model.startswith("ours-") and model[5:] in VARIANTS:
        return model[5:]
    return None


def variant_params(base: OursTrainParams, variant: str) -> OursTrainParams:
    """`base` (params.yaml's train.ours) with the variant's switches applied."""
    overrides, _ = VARIANTS[variant]
    return base.model_copy(update=overrides)


def table4_rows(variant: str) -> tuple[str, ...]:
    return VARIANTS[variant][1]
