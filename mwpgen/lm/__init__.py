"""Causal language models: loading, prompts, training (Eq. 3), decoding."""
