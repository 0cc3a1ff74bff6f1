"""Seq2seq baselines of the paper (seq2seq-rnn, + GloVe, seq2seq-tf), in plain PyTorch.

    vocab.py        word-level vocabularies (training fold only, lowercased, OOV -> <unk>), source/target tokens
    rnn.py          LSTM encoder-decoder, optional Luong attention with input feeding
    transformer.py  transformer encoder-decoder + Noam schedule
    checkpoint.py   the model's constructor, its checkpoint folder, the marker of a baseline that did not run
    decode.py       batched greedy and beam search; problems from a checkpoint
    train.py        training loop, presets from the paper's configuration table
    glove.py        GloVe vectors for seq2seq-rnn + GloVe
    baseline.py     one baseline trained on a fold, as the train_seq2seq stage runs it

Import the module you need (`from mwpgen.seq2seq.decode import ...`): this file imports nothing, so generating or
scoring never loads (nor depends on) the training code.
"""
