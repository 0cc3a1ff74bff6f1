"""The fetcher: mirror hit, URL path against a local HTTP server, checksum refusal, missing everywhere,
interrupted download."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest

from mwpgen.data.fetch import ChecksumMismatch, SourceUnavailable, fetch_file, resolve_mirror
from mwpgen.data.sources import SOURCES, SourceFile

PAYLOAD = b'[{"iIndex": 1, "sQuestion": "Joan found 70.0 seashells ."}]\n'


def source(payload: bytes = PAYLOAD, path: str = "arith/questions.json", **kw) -> SourceFile:
    return SourceFile(path, "o/r", "c" * 40, "data/q.json", hashlib.sha256(payload).hexdigest(), **kw)


class _Handler(http.server.SimpleHTTPRequestHandler):
    truncate_at: dict[str, int] = {}

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        if name in self.truncate_at:  # promise the whole file, send part of it, hang up
            body = (Path(self.directory) / name).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: self.truncate_at[name]])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    handler = partial(_Handler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    _Handler.truncate_at = {}
    httpd.shutdown()


def no_sleep(_):
    pass


def test_mirror_hit_copies_and_verifies(tmp_path):
    mirror, dest = tmp_path / "mirror", tmp_path / "raw"
    src = source()
    (mirror / "arith").mkdir(parents=True)
    (mirror / src.path).write_bytes(PAYLOAD)
    got = fetch_file(src, dest, mirror, url_for=lambda s: "http://127.0.0.1:9/unreachable")
    assert got.origin == "mirror" and (dest / src.path).read_bytes() == PAYLOAD
    again = fetch_file(src, dest, mirror)
    assert again.origin == "present"


def test_url_path_when_mirror_lacks_file(tmp_path, server):
    root, base = server
    (root / "q.json").write_bytes(PAYLOAD)
    src = source()
    got = fetch_file(src, tmp_path / "raw", tmp_path / "empty-mirror", url_for=lambda s: f"{base}/q.json")
    assert got.origin == "url" and got.path.read_bytes() == PAYLOAD


def test_zip_member_is_extracted_and_verified(tmp_path, server):
    root, base = server
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("Math_23K.json", PAYLOAD)
    (root / "m.zip").write_bytes(buf.getvalue())
    src = source(path="math23k/Math_23K.json", zip_member="Math_23K.json")
    got = fetch_file(src, tmp_path / "raw", None, url_for=lambda s: f"{base}/m.zip")
    assert got.path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in got.path.parent.iterdir()) == ["Math_23K.json"]  # no temp files left


def test_checksum_mismatch_is_refused_and_nothing_written(tmp_path):
    mirror, dest = tmp_path / "mirror", tmp_path / "raw"
    src = source()
    (mirror / "arith").mkdir(parents=True)
    (mirror / src.path).write_bytes(PAYLOAD[:-5])  # truncated copy
    with pytest.raises(ChecksumMismatch, match=r"arith/questions.json.*expected sha256"):
        fetch_file(src, dest, mirror)
    assert list((dest / "arith").iterdir()) == []


def test_missing_everywhere_names_file_and_both_places(tmp_path, server):
    _, base = server
    src = source()
    with pytest.raises(SourceUnavailable) as e:
        fetch_file(src, tmp_path / "raw", tmp_path / "mirror", url_for=lambda s: f"{base}/absent.json",
                   retries=1, sleep=no_sleep)
    msg = str(e.value)
    assert "arith/questions.json" in msg and str(tmp_path / "mirror") in msg and f"{base}/absent.json" in msg
    assert "404" in msg


def test_interrupted_download_leaves_no_partial_file(tmp_path, server):
    root, base = server
    (root / "q.json").write_bytes(PAYLOAD)
    _Handler.truncate_at = {"q.json": 10}
    src = source()
    dest = tmp_path / "raw"
    with pytest.raises(SourceUnavailable, match="arith/questions.json"):
        fetch_file(src, dest, None, url_for=lambda s: f"{base}/q.json", retries=0)
    assert not (dest / src.path).exists()
    assert list((dest / "arith").iterdir()) == []
    # A later run with a healthy server completes.
    _Handler.truncate_at = {}
    assert fetch_file(src, dest, None, url_for=lambda s: f"{base}/q.json").path.read_bytes() == PAYLOAD


def test_corrupt_existing_file_is_replaced(tmp_path):
    mirror, dest = tmp_path / "mirror", tmp_path / "raw"
    src = source()
    for root in (mirror, dest):
        (root / "arith").mkdir(parents=True)
    (mirror / src.path).write_bytes(PAYLOAD)
    (dest / src.path).write_bytes(b"garbage")
    assert fetch_file(src, dest, mirror).origin == "mirror"
    assert (dest / src.path).read_bytes() == PAYLOAD


def test_mirror_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("MWPGEN_MIRROR", raising=False)
    assert resolve_mirror("../m", tmp_path / "proj") == (tmp_path / "m").resolve()
    assert resolve_mirror("", tmp_path) is None
    monkeypatch.setenv("MWPGEN_MIRROR", str(tmp_path / "elsewhere"))
    assert resolve_mirror("../m", tmp_path) == tmp_path / "elsewhere"


def test_registry_urls_are_pinned_to_commits():
    for files in SOURCES.values():
        for f in files:
            assert f.url.startswith("https://raw.githubusercontent.com/") and len(f.commit) == 40
            assert len(f.sha256) == 64
