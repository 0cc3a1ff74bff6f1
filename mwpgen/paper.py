"""Numbers REPORTED IN THE PAPER (Wang, Lan & Baraniuk, EMNLP 2021), copied verbatim from its LaTeX source.

These are reference figures for side-by-side display next to this reproduction's own results. They are never
used as results, inputs, thresholds or fallbacks anywhere in the pipeline.

Sources (``shared/paper/wang-lan-baraniuk-2021-mwp-generation.tex``):
- ``TABLE1``: Table 1 (tab:data), #MWPs, average words per MWP and symbols per equation.
- ``TABLE2``: Table 2 (tab:quant-results), language quality and ACC-eq, 5-fold cross-validation averages.
- ``ORACLE_ACC_EQ``: the bracketed numbers under ACC-eq in Table 2 (mwp2eq accuracy on ground-truth MWPs).
- ``TABLE3_PERCENT_NOVEL``: Table 3 (tab:unique), % of generated MWPs not present in the training data
  (percentages, 0-100, not fractions).
- ``TABLE4``: Table 4 (tab:ablation), BLEU-4 and ACC-eq per ablation variant.

Note the paper's own inconsistency, kept as printed: Table 4's "full model" Math23K row (0.332 / 0.513) differs
from Table 2's "ours" Math23K row (0.329 / 0.505).
"""

from __future__ import annotations

from typing import Final

DATASETS: Final = ("arithmetic", "mawps", "math23k")

# TABLE1[dataset]: Table 1 (tab:data), dataset statistics.
TABLE1: Final[dict[str, dict[str, float]]] = {
    "arithmetic": {"mwps": 1492, "avg_words": 29.89, "avg_symbols": 8.05},
    "mawps": {"mwps": 2373, "avg_words": 31.25, "avg_symbols": 8.16},
    "math23k": {"mwps": 23162, "avg_words": 35.23, "avg_symbols": 8.78},
}
TABLE2_METRICS: Final = ("bleu4", "meteor", "rouge_l", "acc_eq")

# TABLE2[model][dataset][metric]
TABLE2: Final[dict[str, dict[str, dict[str, float]]]] = {
    "seq2seq-rnn": {
        "arithmetic": {"bleu4": 0.075, "meteor": 0.152, "rouge_l": 0.311, "acc_eq": 0.413},
        "mawps": {"bleu4": 0.153, "meteor": 0.175, "rouge_l": 0.362, "acc_eq": 0.472},
        "math23k": {"bleu4": 0.196, "meteor": 0.234, "rouge_l": 0.444, "acc_eq": 0.390},
    },
    "seq2seq-rnn+glove": {
        "arithmetic": {"bleu4": 0.351, "meteor": 0.310, "rouge_l": 0.555, "acc_eq": 0.399},
        "mawps": {"bleu4": 0.592, "meteor": 0.412, "rouge_l": 0.705, "acc_eq": 0.585},
        "math23k": {"bleu4": 0.275, "meteor": 0.277, "rouge_l": 0.507, "acc_eq": 0.438},
    },
    "seq2seq-tf": {
        "arithmetic": {"bleu4": 0.339, "meteor": 0.298, "rouge_l": 0.524, "acc_eq": 0.405},
        "mawps": {"bleu4": 0.554, "meteor": 0.387, "rouge_l": 0.663, "acc_eq": 0.588},
        "math23k": {"bleu4": 0.301, "meteor": 0.294, "rouge_l": 0.524, "acc_eq": 0.509},
    },
    "gpt": {
        "arithmetic": {"bleu4": 0.237, "meteor": 0.248, "rouge_l": 0.455, "acc_eq": 0.401},
        "mawps": {"bleu4": 0.368, "meteor": 0.294, "rouge_l": 0.538, "acc_eq": 0.532},
        "math23k": {"bleu4": 0.282, "meteor": 0.297, "rouge_l": 0.512, "acc_eq": 0.477},
    },
    "gpt-pre": {
        "arithmetic": {"bleu4": 0.316, "meteor": 0.322, "rouge_l": 0.554, "acc_eq": 0.403},
        "mawps": {"bleu4": 0.504, "meteor": 0.391, "rouge_l": 0.664, "acc_eq": 0.512},
        "math23k": {"bleu4": 0.325, "meteor": 0.333, "rouge_l": 0.548, "acc_eq": 0.498},
    },
    "ours": {
        "arithmetic": {"bleu4": 0.338, "meteor": 0.322, "rouge_l": 0.567, "acc_eq": 0.453},
        "mawps": {"bleu4": 0.596, "meteor": 0.427, "rouge_l": 0.715, "acc_eq": 0.557},
        "math23k": {"bleu4": 0.329, "meteor": 0.328, "rouge_l": 0.544, "acc_eq": 0.505},
    },
}

# Table 2, bracketed: accuracy of the mwp2eq model on the ground-truth MWPs (upper bound on ACC-eq).
ORACLE_ACC_EQ: Final[dict[str, float]] = {"arithmetic": 0.769, "mawps": 0.755, "math23k": 0.672}

# Table 3, in percent (0-100).
TABLE3_PERCENT_NOVEL: Final[dict[str, dict[str, float]]] = {
    "seq2seq-tf": {"arithmetic": 6.24, "mawps": 2.49, "math23k": 38.88},
    "ours": {"arithmetic": 94.90, "mawps": 63.77, "math23k": 95.72},
}

# TABLE4[variant][dataset] = {"bleu4": ..., "acc_eq": ...}; variant keys follow the table's row labels.
TABLE4: Final[dict[str, dict[str, dict[str, float]]]] = {
    "L_eq (softmax)": {
        "arithmetic": {"bleu4": 0.110, "acc_eq": 0.417},
        "mawps": {"bleu4": 0.308, "acc_eq": 0.555},
        "math23k": {"bleu4": 0.284, "acc_eq": 0.466},
    },
    "L_eq (Gumbel-softmax)": {
        "arithmetic": {"bleu4": 0.303, "acc_eq": 0.455},
        "mawps": {"bleu4": 0.522, "acc_eq": 0.527},
        "math23k": {"bleu4": 0.306, "acc_eq": 0.495},
    },
    "keyword, TF-IDF": {
        "arithmetic": {"bleu4": 0.313, "acc_eq": 0.424},
        "mawps": {"bleu4": 0.518, "acc_eq": 0.536},
        "math23k": {"bleu4": 0.310, "acc_eq": 0.498},
    },
    "keyword, noun+pronoun": {
        "arithmetic": {"bleu4": 0.316, "acc_eq": 0.413},
        "mawps": {"bleu4": 0.504, "acc_eq": 0.512},
        "math23k": {"bleu4": 0.325, "acc_eq": 0.498},
    },
    "context selection": {
        "arithmetic": {"bleu4": 0.320, "acc_eq": 0.412},
        "mawps": {"bleu4": 0.533, "acc_eq": 0.542},
        "math23k": {"bleu4": 0.324, "acc_eq": 0.501},
    },
    "full model w/o L_c": {
        "arithmetic": {"bleu4": 0.303, "acc_eq": 0.455},
        "mawps": {"bleu4": 0.522, "acc_eq": 0.527},
        "math23k": {"bleu4": 0.306, "acc_eq": 0.495},
    },
    "full model w/o L_eq": {
        "arithmetic": {"bleu4": 0.320, "acc_eq": 0.412},
        "mawps": {"bleu4": 0.491, "acc_eq": 0.500},
        "math23k": {"bleu4": 0.324, "acc_eq": 0.501},
    },
    "full model w/o both": {
        "arithmetic": {"bleu4": 0.316, "acc_eq": 0.403},
        "mawps": {"bleu4": 0.504, "acc_eq": 0.512},
        "math23k": {"bleu4": 0.325, "acc_eq": 0.498},
    },
    "full model": {
        "arithmetic": {"bleu4": 0.338, "acc_eq": 0.453},
        "mawps": {"bleu4": 0.596, "acc_eq": 0.557},
        "math23k": {"bleu4": 0.332, "acc_eq": 0.513},
    },
}

# Table 5 (tab:kw): (MWP, selected context keywords), the paper's two examples.
TABLE5: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("Emily collects num1 cards . Emily ' s father gives Emily num2 more . Bruce has apples . How many cards "
     "does Emily have ?", ("Emily", "cards", "collects", "father")),
    ("The school cafeteria had num1 apples . If they used num3 to make lunch for the students and then bought "
     "num2 more , how many apples would they have ?", ("apples", "cafeteria")),
)
