"""scripts/env.sh's allocator choice: jemalloc preloaded once when named, glibc's malloc when MWPGEN_JEMALLOC is empty."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sourced(env: dict, times: int = 1) -> str:
    """LD_PRELOAD after sourcing scripts/env.sh `times` times (echo is a builtin: nothing is loaded with it)."""
    source = " && ".join([f". {ROOT / 'scripts' / 'env.sh'}"] * times)
    return subprocess.run(["bash", "-c", f'{source} && echo "${{LD_PRELOAD:-}}"'], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_named_jemalloc_is_preloaded_once_before_what_was_there(tmp_path):
    lib = tmp_path / "libjemalloc.so.2"
    lib.write_bytes(b"")
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MWPGEN_JEMALLOC")}
    assert _sourced({**base, "MWPGEN_JEMALLOC": str(lib)}, times=2) == str(lib)
    assert _sourced({**base, "MWPGEN_JEMALLOC": str(lib), "LD_PRELOAD": "/x/other.so"}) == f"{lib}:/x/other.so"


def test_empty_mwpgen_jemalloc_keeps_glibc_malloc():
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MWPGEN_JEMALLOC")}
    assert _sourced({**base, "MWPGEN_JEMALLOC": ""}) == ""
