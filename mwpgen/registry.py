"""Every model the pipeline trains, generates with or scores: one entry each.

A model's `name` is its folder under models/, results/ and metrics/, its MLflow run name and its dvc.yaml matrix
value. Flows and the report dispatch on `family`, never on the spelling of a name. Adding a model = one entry
here + its params (and, for a new family, its trainer and decoder).

    causal_lm  a causal LM fine-tuned with L_LM (Eq. 3) on "equation + context -> problem"  (stage `train_generator`)
    seq2seq    an encoder-decoder trained from scratch                                   (stage `train_seq2seq`)
    ours       the paper's method: selector + generator + co-trained mwp2eq               (stage `train_ours`)
    mwp2eq     a problem -> equation LM: model `evaluator`, the independent parser that judges ACC-eq
               (stage `train_evaluator`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["causal_lm", "seq2seq", "ours", "mwp2eq"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: Family
    display: str  # how the tables name it
    paper_key: str | None  # its row in mwpgen.paper (None: not a row of the paper's tables)
    pretrained: bool = True  # starts from params.train.model's pre-trained weights (GPT: same shape, random init)
    glove: bool = False  # seq2seq word embeddings initialised from GloVe
    preset: str | None = None  # seq2seq architecture preset (mwpgen/seq2seq/train.py)
    variant: str | None = None  # ours: the Table 4 ablation variant (mwpgen/ours/ablation.py); None = params as set

    @property
    def decoder(self) -> str:
        """How its problems are decoded: "lm" (KV-cache LM decoding), "ours" (selector picks the context, then
        LM decoding) or "seq2seq" (beam / greedy over word vocabularies)."""
        return {"causal_lm": "lm", "ours": "ours", "seq2seq": "seq2seq"}[self.family]


EVALUATOR = ModelSpec("evaluator", "mwp2eq", "mwp2eq oracle", "oracle")

# Table 2's generators, in the paper's row order.
GENERATORS: tuple[ModelSpec, ...] = (
    ModelSpec("seq2seq_rnn", "seq2seq", "seq2seq-rnn", "seq2seq-rnn", pretrained=False, preset="seq2seq-rnn"),
    ModelSpec("seq2seq_rnn_glove", "seq2seq", "seq2seq-rnn + GloVe", "seq2seq-rnn+glove", pretrained=False,
              glove=True, preset="seq2seq-rnn"),
    ModelSpec("seq2seq_tf", "seq2seq", "seq2seq-tf", "seq2seq-tf", pretrained=False, preset="seq2seq-transformer"),
    ModelSpec("gpt", "causal_lm", "GPT", "gpt", pretrained=False),
    ModelSpec("gpt_pre", "causal_lm", "GPT-pre", "gpt-pre"),
    ModelSpec("ours", "ours", "ours", "ours"),
)

# Table 4's variants of ours (each trained, generated and scored as model "ours-<variant>").
ABLATION_VARIANTS = ("eq_softmax", "eq_gumbel", "tfidf", "noun", "selector", "no_context_loss", "no_both", "full")
ABLATIONS: tuple[ModelSpec, ...] = tuple(ModelSpec(f"ours-{v}", "ours", f"ours-{v}", None, variant=v)
                                         for v in ABLATION_VARIANTS)

# ours tuned on blind readings (mwpgen/tuning.py; stage `tune`), each generated and scored as model "ours-<method>".
TUNING_METHODS = ("rft", "dpo")
TUNED: tuple[ModelSpec, ...] = tuple(ModelSpec(f"ours-{m}", "ours", f"ours + {m.upper()} on readings", None)
                                     for m in TUNING_METHODS)

MODELS: dict[str, ModelSpec] = {m.name: m for m in (*GENERATORS, EVALUATOR, *ABLATIONS, *TUNED)}


def spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def names(family: Family | None = None, *, table2: bool = False) -> tuple[str, ...]:
    """Model names of one family (all families: None); `table2=True` keeps Table 2's generators only."""
    pool = GENERATORS if table2 else tuple(MODELS.values())
    return tuple(m.name for m in pool if family is None or m.family == family)


def ablation_model(variant: str) -> str:
    """The model name of a Table 4 variant: "ours-<variant>"."""
    if variant not in ABLATION_VARIANTS:
        raise ValueError(f"unknown ablation variant {variant!r}; known: {', '.join(ABLATION_VARIANTS)}")
    return f"ours-{variant}"


def tuned_model(method: str) -> str:
    """The model name of ours tuned by `method`: "ours-<method>"."""
    if method not in TUNING_METHODS:
        raise ValueError(f"unknown tuning method {method!r}; known: {', '.join(TUNING_METHODS)}")
    return f"ours-{method}"


def max_train(params, name: str, dataset: str) -> int:
    """How many training problems model `name` trains on (0 = the whole training fold): its own cap in
    `train.<section>.max_train` where it has one, else the dataset's (`experiment.subsample`, whose
    `evaluator_max_train` sets the evaluator's apart), else `experiment.max_train`. `params` is a
    config.Params."""
    family = spec(name).family
    own = {"causal_lm": params.train.generator, "mwp2eq": params.train.evaluator, "ours": params.train.ours}.get(family)
    if own is not None and own.max_train:
        return own.max_train
    subsample = params.experiment.subsample.get(dataset)
    if family == "mwp2eq" and subsample is not None and subsample.evaluator_max_train is not None:
        return subsample.evaluator_max_train
    return params.experiment.max_train_of(dataset)


def generator_names() -> tuple[str, ...]:
    """Every model the generate and evaluate stages accept: Table 2's generators, ours' ablation variants and ours
    tuned on readings."""
    return tuple(m.name for m in (*GENERATORS, *ABLATIONS, *TUNED))


def served_model(params, dataset: str, fold: int) -> str:
    """The model served for (dataset, fold) (`params`: a config.Params): serve.model where the run tunes that fold
    (tuning.datasets x tuning.folds), else ours, which is the only model of a fold that tuning does not cover."""
    tuning = params.tuning
    return params.serve.model if dataset in tuning.datasets and fold in tuning.folds else "ours"
