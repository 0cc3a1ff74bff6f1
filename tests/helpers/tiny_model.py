"""A tiny random causal LM for fast offline tests and bench smoke runs: no download, no 135M model."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from mwpgen.lm.loading import atomic_save_pretrained


def tiny_model_dir(path: Path, corpus: Iterable[str], *, seed: int = 1234, layers: int = 2, hidden: int = 32,
                   architecture: str = "llama") -> Path:
    """Build a tiny random Llama-style causal LM (`architecture="gpt2"`: GPT-2-style, absolute positions) with a
    word-level tokenizer covering `corpus`.

    For fast offline tests: no download, no 135M model. Words are split like
    tokenizers' `Whitespace` pre-tokenizer (runs of word chars, runs of punctuation).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    pre = pre_tokenizers.Whitespace()
    words = sorted({w for text in corpus for w, _ in pre.pre_tokenize_str(text)} - set(specials))
    vocab = {w: i for i, w in enumerate(specials + words)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    if architecture == "gpt2":
        config, build = GPT2Config(vocab_size=len(vocab), n_embd=hidden, n_layer=layers, n_head=4, n_positions=512,
                                   pad_token_id=vocab["<pad>"], eos_token_id=vocab["<eos>"],
                                   bos_token_id=vocab["<eos>"]), GPT2LMHeadModel
    else:
        config, build = LlamaConfig(
            vocab_size=len(vocab), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
            pad_token_id=vocab["<pad>"], eos_token_id=vocab["<eos>"], bos_token_id=None,
        ), LlamaForCausalLM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build(config)
    return atomic_save_pretrained(model, tok, Path(path))
