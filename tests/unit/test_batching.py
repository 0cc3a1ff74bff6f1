"""Seeded batches (mwpgen.batching.seeded_batches): plain and length-grouped."""

import random

import pytest

from mwpgen.batching import LENGTH_POOL_BATCHES, seeded_batches


def padded_share(batches, lengths):
    real = sum(lengths[i] for b in batches for i in b)
    computed = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    return 1 - real / computed


@pytest.mark.parametrize("n", [1, 7, 8, 401, 1090])
def test_length_grouped_batches_cover_the_epoch_once_in_as_many_steps(n):
    lengths = [random.Random(i).randint(20, 110) for i in range(n)]
    plain = seeded_batches(n, 8, seed=3, stream=1)
    grouped = seeded_batches(n, 8, seed=3, stream=1, lengths=lengths)
    assert sorted(i for b in grouped for i in b) == list(range(n))
    assert len(grouped) == len(plain)  # the same steps per epoch: schedules and resumption are unchanged
    assert all(len(b) == 8 for b in grouped[:-1] if n % 8 == 0)


def test_length_grouped_batches_are_a_pure_function_of_seed_stream_and_lengths():
    lengths = [random.Random(i).randint(20, 110) for i in range(1000)]
    a = seeded_batches(1000, 8, seed=0, stream=2, lengths=lengths)
    assert a == seeded_batches(1000, 8, seed=0, stream=2, lengths=lengths)
    assert a != seeded_batches(1000, 8, seed=0, stream=3, lengths=lengths)
    assert a != seeded_batches(1000, 8, seed=1, stream=2, lengths=lengths)


def test_length_grouping_computes_less_padding_and_still_mixes_the_epoch():
    rng = random.Random(0)
    lengths = [rng.randint(40, 110) for _ in range(1600)]
    plain = seeded_batches(1600, 8, seed=0, stream=0)
    grouped = seeded_batches(1600, 8, seed=0, stream=0, lengths=lengths)
    assert padded_share(grouped, lengths) < padded_share(plain, lengths) / 3
    # Batches come from every pool of the seeded order, shuffled: the first few are not all from the first pool.
    pool_of = {i: k // (LENGTH_POOL_BATCHES * 8) for k, i in enumerate(i for b in plain for i in b)}
    assert len({pool_of[b[0]] for b in grouped[:20]}) > 1


def test_lengths_must_match_the_examples():
    with pytest.raises(ValueError, match="3 lengths for 4 examples"):
        seeded_batches(4, 2, seed=0, stream=0, lengths=[1, 2, 3])
