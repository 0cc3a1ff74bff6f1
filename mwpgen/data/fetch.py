"""Fetch raw files: the mirror folder first, then the upstream URL; verify sha256; never leave a partial file.

A file already in place with the right checksum is kept as is, so a rerun only fetches what is missing.
Everything is written to a temp file beside the destination and renamed only once complete and verified.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mwpgen.data.sources import SourceFile
from mwpgen.io import ordinary_mode, sha256_file

CHUNK = 1 << 20


class ChecksumMismatch(RuntimeError):
    pass


class SourceUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class Fetched:
    source: SourceFile
    path: Path
    origin: Literal["present", "mirror", "url"]
    bytes: int


def _check(path: Path, src: SourceFile, where: str) -> None:
    got = sha256_file(path)
    if got != src.sha256:
        raise ChecksumMismatch(
            f"{src.path}: checksum mismatch for the copy from {where}: expected sha256 {src.sha256}, got {got}; "
            "refusing it (the file is corrupt, truncated or a different version)"
        )


def _temp_beside(dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    os.close(fd)
    ordinary_mode(tmp)  # the verified file keeps it after the rename
    return Path(tmp)


def _download(url: str, out: Path, timeout_s: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp, open(out, "wb") as f:
        expected = resp.headers.get("Content-Length")
        copied = 0
        while chunk := resp.read(CHUNK):
            f.write(chunk)
            copied += len(chunk)
    if expected is not None and copied != int(expected):
        raise OSError(f"download interrupted: got {copied} of {expected} bytes")


def _extract_member(archive: Path, member: str, out: Path) -> None:
    with zipfile.ZipFile(archive) as z, z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, CHUNK)


def _from_url(src: SourceFile, url: str, tmp: Path, timeout_s: float, retries: int, sleep) -> None:
    last: Exception | None = None
    for attempt in range(retries + 1):
        try:
            if src.zip_member:
                archive = tmp.with_suffix(".zip.part")
                try:
                    _download(url, archive, timeout_s)
                    _extract_member(archive, src.zip_member, tmp)
                finally:
                    archive.unlink(missing_ok=True)
            else:
                _download(url, tmp, timeout_s)
            return
        except (OSError, zipfile.BadZipFile, KeyError) as e:  # URLError and timeouts are OSErrors
            last = e
            if attempt < retries:
                sleep(2.0 * 2**attempt)
    raise OSError(f"{type(last).__name__}: {last}")


def fetch_file(
    src: SourceFile,
    dest_root: str | os.PathLike,
    mirror: str | os.PathLike | None,
    *,
    timeout_s: float = 60.0,
    retries: int = 2,
    url_for: Callable[[SourceFile], str] = lambda s: s.url,
    sleep: Callable[[float], None] = time.sleep,
) -> Fetched:
    dest = Path(dest_root) / src.path
    if dest.exists() and sha256_file(dest) == src.sha256:
        return Fetched(src, dest, "present", dest.stat().st_size)

    tried: list[str] = []
    tmp = _temp_beside(dest)
    try:
        mirrored = Path(mirror) / src.path if mirror else None
        if mirrored is not None and mirrored.is_file():
            shutil.copyfile(mirrored, tmp)
            _check(tmp, src, f"mirror {mirrored}")
            origin = "mirror"
        else:
            tried.append(f"mirror {mirrored} (not found)" if mirrored else "no mirror configured")
            url = url_for(src)
            try:
                _from_url(src, url, tmp, timeout_s, retries, sleep)
            except OSError as e:
                tried.append(f"URL {url} ({e})")
                raise SourceUnavailable(f"{src.path}: not available; tried " + "; ".join(tried)) from None
            _check(tmp, src, f"URL {url}")
            origin = "url"
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return Fetched(src, dest, origin, dest.stat().st_size)


def resolve_mirror(param: str, project_root: str | os.PathLike) -> Path | None:
    """MWPGEN_MIRROR wins over the param; relative paths are taken from the project root; '' disables."""
    value = os.environ.get("MWPGEN_MIRROR", param)
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else (Path(project_root) / path).resolve()
