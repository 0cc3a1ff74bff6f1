"""Scoring and reporting: metrics (BLEU-4, METEOR, ROUGE-L, ACC-eq, novelty, Dist-3), report tables, the paper's
figures."""
