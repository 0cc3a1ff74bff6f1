"""Seq2seq baselines of the paper (seq2seq-rnn, + GloVe, seq2seq-tf), in plain PyTorch.

    vocab.py        word-level vocabularies (training fold only, lowercased, OOV -> <unk>), source/target tokens
    rnn.py          LSTM encoder-decoder, optional Luong attention with input feeding
    transformer.py  transformer encoder-decoder + Noam schedule
    decode.py       batched greedy and beam search
    train.py        training loop, presets from the paper's configuration table, checkpoints
"""

from .decode import Hypothesis, beam_search, decode_problems, greedy_decode, sequence_logprob
from .rnn import Seq2SeqRNN
from .train import (MODEL_PRESETS, TRAIN_PRESETS, build_model, load_checkpoint, paper_steps, save_checkpoint,
                    train_seq2seq, training_epochs)
from .transformer import Seq2SeqTransformer, noam_lr
from .vocab import Vocab, build_vocabs, source_tokens, target_tokens

__all__ = ["Hypothesis", "beam_search", "decode_problems", "greedy_decode", "sequence_logprob", "Seq2SeqRNN",
           "MODEL_PRESETS", "TRAIN_PRESETS", "build_model", "load_checkpoint", "paper_steps", "save_checkpoint",
           "train_seq2seq", "training_epochs", "Seq2SeqTransformer", "noam_lr", "Vocab", "build_vocabs",
           "source_tokens", "target_tokens"]
