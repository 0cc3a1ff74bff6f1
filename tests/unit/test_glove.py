"""GloVe loading on tiny files written here; downloads are replaced by fakes (no network)."""

from __future__ import annotations

import io
import json
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mwpgen.io import DataFormatError, sha256_file
from mwpgen.seq2seq import glove
from mwpgen.seq2seq.glove import (
    GloveIntegrityError,
    GloveUnavailable,
    embedding_matrix,
    fetch_glove,
    load_glove,
    read_vectors,
)
from mwpgen.seq2seq.vocab import PAD_ID, Vocab

TINY = "the 0.1 0.2 0.3\napples 1.0 -1.0 0.5\njoan 0.0 0.0 1e-3\nthe 9 9 9\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def zip_bytes(member: str, text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(member, text)
    return buf.getvalue()


def fake_downloader(payload: bytes, calls: list):
    def download(url: str, dest: Path) -> None:
        calls.append(url)
        dest.write_bytes(payload)
    return download


def test_tiny_file_loads_first_occurrence_wins(tmp_path):
    vectors = load_glove(write(tmp_path / "g.txt", TINY), dim=3)
    assert set(vectors) == {"the", "apples", "joan"}
    assert vectors["the"].tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert vectors["joan"].dtype == np.float32
    only = read_vectors(tmp_path / "g.txt", dim=3, words={"apples", "zebra"})
    assert list(only) == ["apples"]
    assert set(read_vectors(tmp_path / "g.txt", dim=None)) == {"the", "apples", "joan"}  # dim from line 1


def test_embedding_matrix_counts_coverage_and_keeps_random_rows(tmp_path):
    vocab = Vocab.build([["the", "apples", "zebra", "the"]])
    vectors = load_glove(write(tmp_path / "g.txt", TINY), dim=3, words=vocab.itos)
    init = embedding_matrix(vocab, vectors, 3, np.random.default_rng(0))
    assert (init.found, init.total, init.missing) == (2, 3, ["zebra"])
    assert init.coverage == pytest.approx(2 / 3)
    assert init.matrix.shape == (len(vocab), 3) and init.matrix.dtype == np.float32
    assert init.matrix[vocab.stoi["apples"]].tolist() == pytest.approx([1.0, -1.0, 0.5])
    assert not init.matrix[PAD_ID].any()
    random_rows = init.matrix[[vocab.stoi["zebra"], 1, 2]]
    assert np.abs(random_rows).max() <= 0.1 and np.abs(random_rows).min() > 0
    same = embedding_matrix(vocab, vectors, 3, np.random.default_rng(0))
    assert np.array_equal(same.matrix, init.matrix)  # reproducible from the rng


def test_glove_rows_load_into_the_rnn(tmp_path):
    import torch

    from mwpgen.seq2seq.checkpoint import build_model

    vocab = Vocab.build([["the", "apples"]])
    init = embedding_matrix(vocab, load_glove(write(tmp_path / "g.txt", TINY), dim=3), 3, np.random.default_rng(0))
    model = build_model({"kind": "rnn", "src_vocab_size": len(vocab), "tgt_vocab_size": len(vocab), "emb_dim": 3,
                         "hidden": 4, "layers": 1}, seed=0)
    model.init_embeddings(src=torch.from_numpy(init.matrix), tgt=torch.from_numpy(init.matrix))
    assert model.tgt_emb.weight[vocab.stoi["apples"]].tolist() == pytest.approx([1.0, -1.0, 0.5])
    with pytest.raises(ValueError):
        model.init_embeddings(src=torch.zeros(2, 3))


@pytest.mark.parametrize("bad, line, what", [
    ("apples 1.0 2.0\n", 2, "fields"),  # too few values
    ("apples 1.0 2.0 3.0 4.0\n", 2, "fields"),  # too many values
    ("apples 1.0 two 3.0\n", 2, "non-numeric"),
    ("apples 1.0 nan 3.0\n", 2, "non-finite"),
    ("\n", 2, "fields"),  # blank line
])
def test_malformed_line_is_named_by_file_and_line(tmp_path, bad, line, what):
    path = write(tmp_path / "bad.txt", "the 0.1 0.2 0.3\n" + bad + "joan 0 0 0\n")
    with pytest.raises(DataFormatError, match=what) as err:
        load_glove(path, dim=3, words={"the"})  # checked even though "apples" is not asked for
    assert f"{path}:{line}:" in str(err.value) and err.value.line == line


def test_wrong_dimension_and_encoding_are_rejected(tmp_path):
    with pytest.raises(DataFormatError, match="300") as err:
        load_glove(write(tmp_path / "d3.txt", TINY))  # a 3-d file where 300-d vectors are expected
    assert err.value.line == 1
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"the 0 0 0\ncaf\xe9 1 1 1\n")
    with pytest.raises(DataFormatError, match="UTF-8") as err:
        load_glove(path, dim=3)
    assert err.value.line == 2
    with pytest.raises(DataFormatError, match="empty"):
        load_glove(write(tmp_path / "empty.txt", ""), dim=3)


def test_missing_local_file_is_unavailable(tmp_path):
    with pytest.raises(GloveUnavailable, match="does not exist"):
        load_glove(tmp_path / "nope.txt")
    with pytest.raises(GloveUnavailable, match="cache_dir"):
        load_glove()


def test_failed_download_raises_glove_unavailable(tmp_path, monkeypatch):
    def no_network(url, dest, timeout=glove.DOWNLOAD_TIMEOUT_S):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(glove, "_download", no_network)
    with pytest.raises(GloveUnavailable, match="could not be downloaded from https://nlp.stanford.edu") as err:
        load_glove(cache_dir=tmp_path / "cache", words={"the"})
    assert "name resolution" in str(err.value)
    assert not [p for p in (tmp_path / "cache").iterdir()]  # nothing half-written is left in the cache
    # A download that is not the expected archive is unavailable too, never used.
    with pytest.raises(GloveUnavailable, match="could not extract"):
        fetch_glove(tmp_path / "cache", downloader=fake_downloader(b"<html>error page</html>", []))


def test_download_is_cached_with_its_checksum_and_verified_on_reuse(tmp_path):
    cache = tmp_path / "cache"
    calls: list[str] = []
    text = "the " + " ".join(["0.5"] * 300) + "\n"
    download = fake_downloader(zip_bytes(glove.GLOVE_MEMBER, text), calls)
    vectors = load_glove(cache_dir=cache, words={"the"}, downloader=download)
    assert calls == [glove.GLOVE_URL] and vectors["the"].shape == (300,)
    cached = cache / glove.GLOVE_MEMBER
    record = json.loads((cache / f"{glove.GLOVE_MEMBER}.sha256.json").read_text())
    assert record["sha256"] == sha256_file(cached) and record["url"] == glove.GLOVE_URL
    assert sorted(p.name for p in cache.iterdir()) == [glove.GLOVE_MEMBER, f"{glove.GLOVE_MEMBER}.sha256.json"]

    load_glove(cache_dir=cache, words={"the"}, downloader=download)
    assert len(calls) == 1  # reused, not downloaded again

    cached.write_text(text.replace("0.5", "0.6", 1), encoding="utf-8")  # altered after download
    with pytest.raises(GloveIntegrityError, match="does not match the recorded") as err:
        load_glove(cache_dir=cache, words={"the"}, downloader=download)
    assert str(cached) in str(err.value) and len(calls) == 1

    (cache / f"{glove.GLOVE_MEMBER}.sha256.json").unlink()  # a cache that cannot be verified is not used
    with pytest.raises(GloveIntegrityError, match="no checksum record"):
        fetch_glove(cache, downloader=download)
