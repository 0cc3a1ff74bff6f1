"""GloVe vectors for the "seq2seq-rnn + GloVe" baseline (Pennington et al. 2014): embeddings initialised from
GloVe instead of at random.

Format: one word per line, "word v1 v2 ... vD", single spaces (glove.6B.300d.txt: 400k lowercased words, D=300,
matching the RNN's 300-dim input). Sources, in order:
1. a user-supplied file (`path`): its format is checked line by line (a malformed line raises DataFormatError
   naming file:line), vectors are parsed only for the words asked for;
2. the cache: `cache_dir/glove.6B.300d.txt` with `cache_dir/glove.6B.300d.txt.sha256.json` recorded when it was
   downloaded; its sha256 is verified on every reuse (GloveIntegrityError on mismatch: a truncated or altered
   cache is never used). Trust on first use: Stanford publishes no checksums;
3. a download of the official zip (https://nlp.stanford.edu/data/glove.6B.zip, 822 MB), of which only the
   requested member is kept.
When none of these gives vectors (no file, no cache, no network) GloveUnavailable says why. Nothing is ever
substituted silently: the caller reports the +GloVe row as not run with that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mwpgen.io import DataFormatError, sha256_file, write_json

GLOVE_URL = "https://nlp.stanford.edu/data/glove.6B.zip"
GLOVE_MEMBER = "glove.6B.300d.txt"
GLOVE_DIM = 300
DOWNLOAD_TIMEOUT_S = 60.0


class GloveUnavailable(RuntimeError):
    """No GloVe vectors can be had (missing file, download impossible); the message says why."""


class GloveIntegrityError(DataFormatError):
    """A cached GloVe file no longer matches the sha256 recorded when it was downloaded."""


def _download(url: str, dest: Path, timeout: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Fetch `url` to `dest` (a temp path chosen by the caller). Raises OSError / URLError on failure."""
    with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)


def fetch_glove(cache_dir: str | os.PathLike, *, url: str = GLOVE_URL, member: str = GLOVE_MEMBER,
                downloader: Callable[[str, Path], None] | None = None) -> Path:
    """Path of the cached `member`, downloading and extracting it on first use.

    Reuse verifies the recorded sha256 (GloveIntegrityError on mismatch; a cached file without its record is
    treated the same way, since it cannot be verified). Any download/extraction failure -> GloveUnavailable.
    `downloader(url, dest)` replaces the HTTP fetch (tests)."""
    cache_dir = Path(cache_dir)
    target = cache_dir / member
    record_path = cache_dir / f"{member}.sha256.json"
    if target.exists():
        if not record_path.exists():
            raise GloveIntegrityError(target, f"cached file has no checksum record ({record_path.name}); "
                                              "delete it to download again")
        try:
            expected = json.loads(record_path.read_text(encoding="utf-8"))["sha256"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise GloveIntegrityError(record_path, f"unreadable checksum record ({e}); delete the cache") from e
        actual = sha256_file(target)
        if actual != expected:
            raise GloveIntegrityError(target, f"sha256 {actual} does not match the recorded {expected} "
                                              "(corrupted or altered cache); delete it to download again")
        return target

    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".glove-download-"))
    try:
        archive = tmp / "archive.zip"
        try:
            (downloader or _download)(url, archive)
        except (OSError, urllib.error.URLError, ValueError) as e:  # URLError is an OSError; ValueError: bad URL
            raise GloveUnavailable(f"GloVe vectors could not be downloaded from {url}: {e} "
                                   "(no network? pass a local GloVe text file instead)") from e
        try:
            with zipfile.ZipFile(archive) as zf, zf.open(member) as src, open(tmp / member, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except (zipfile.BadZipFile, KeyError, OSError) as e:
            raise GloveUnavailable(f"downloaded {url} but could not extract {member}: {e}") from e
        digest = sha256_file(tmp / member)
        os.replace(tmp / member, target)  # same folder: atomic, readers never see a partial file
        write_json(record_path, {"sha256": digest, "url": url, "member": member, "bytes": target.stat().st_size})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def read_vectors(path: str | os.PathLike, *, dim: int | None = GLOVE_DIM, words: Iterable[str] | None = None,
                 check_values: bool = True) -> dict[str, np.ndarray]:
    """word -> float32 vector from a GloVe text file, only for `words` when given (a 400k x 300 table is ~0.5 GB).

    Every line must be "word" + exactly `dim` values separated by single spaces (`dim=None`: taken from the
    first line); the first occurrence of a word wins. With `check_values`, every value on every line must parse
    as a finite float (slower; needed for a user-supplied file, not for a verified download). Errors raise
    DataFormatError with file:line."""
    path = Path(path)
    wanted = None if words is None else set(words)
    vectors: dict[str, np.ndarray] = {}
    number = 0
    with open(path, "rb") as f:  # binary, so a bad byte is reported with its own line number
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.rstrip(b"\r\n").decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(path, f"not UTF-8 text ({e.reason})", number) from e
            parts = line.rstrip(" ").split(" ")
            if dim is None:
                dim = len(parts) - 1
                if dim < 1:
                    raise DataFormatError(path, "expected 'word v1 ... vD'", number)
            if len(parts) != dim + 1 or not parts[0]:
                raise DataFormatError(path, f"expected a word and {dim} space-separated values, found "
                                            f"{len(parts)} fields", number)
            need = wanted is None or parts[0] in wanted
            if not (need or check_values):
                continue
            try:
                vec = np.asarray(parts[1:], dtype=np.float32)
            except ValueError as e:
                raise DataFormatError(path, f"non-numeric value ({e})", number) from e
            if not np.isfinite(vec).all():
                raise DataFormatError(path, "non-finite value", number)
            if need:
                vectors.setdefault(parts[0], vec)
    if number == 0:
        raise DataFormatError(path, "empty GloVe file")
    return vectors


def load_glove(path: str | os.PathLike | None = None, *, cache_dir: str | os.PathLike | None = None,
               words: Iterable[str] | None = None, dim: int = GLOVE_DIM, url: str = GLOVE_URL,
               member: str = GLOVE_MEMBER,
               downloader: Callable[[str, Path], None] | None = None) -> dict[str, np.ndarray]:
    """GloVe vectors for `words` (all words when None) from a local file, else the verified cache / download.
    Raises GloveUnavailable (why no vectors), GloveIntegrityError (bad cache) or DataFormatError (bad file)."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise GloveUnavailable(f"GloVe file {path} does not exist")
        return read_vectors(path, dim=dim, words=words, check_values=True)
    if cache_dir is None:
        raise GloveUnavailable("no GloVe file given and no cache_dir to download into")
    cached = fetch_glove(cache_dir, url=url, member=member, downloader=downloader)
    # sha256-verified official file: only the line format of every line is checked, values only where used.
    return read_vectors(cached, dim=dim, words=words, check_values=False)


@dataclass
class EmbeddingInit:
    matrix: np.ndarray  # (len(vocab), dim) float32
    found: int  # vocabulary words (specials excluded) with a GloVe vector
    total: int  # vocabulary words (specials excluded)
    missing: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return self.found / self.total if self.total else 0.0


def embedding_matrix(vocab, vectors: dict[str, np.ndarray], dim: int, rng: np.random.Generator, *,
                     init_range: float = 0.1, specials: Iterable[str] = ("<pad>", "<unk>", "<bos>", "<eos>", "<sep>"),
                     pad_index: int | None = 0) -> EmbeddingInit:
    """Rows of `vocab` (anything with an `itos` list, e.g. seq2seq.vocab.Vocab) from `vectors` where the word
    has one, uniform(-init_range, init_range) otherwise (OpenNMT's -param_init 0.1, the RNN's own init);
    the <pad> row is zero. Lookup is exact: the seq2seq vocabulary and glove.6B are both lowercased."""
    itos = list(vocab.itos)
    specials = set(specials)
    matrix = rng.uniform(-init_range, init_range, size=(len(itos), dim)).astype(np.float32)
    found, missing = 0, []
    for i, word in enumerate(itos):
        if word in specials:
            continue
        vec = vectors.get(word)
        if vec is None:
            missing.append(word)
            continue
        if vec.shape != (dim,):
            raise ValueError(f"vector for {word!r} has shape {vec.shape}, expected ({dim},)")
        matrix[i] = vec
        found += 1
    if pad_index is not None:
        matrix[pad_index] = 0.0
    return EmbeddingInit(matrix, found, found + len(missing), missing)
