"""`dvc plots show` draws offline: .dvc/config names a page with vega, vega-lite and vega-embed inlined (no CDN), and
the curves leave out the steps where a value is blank (val_loss exists at validation steps only)."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_configured_page_loads_nothing_from_the_network():
    config = configparser.ConfigParser()
    config.read(ROOT / ".dvc" / "config")
    page = (ROOT / ".dvc" / config["plots"]["html_template"]).read_text(encoding="utf-8")
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC's placeholder for its CDN tags is left out
    assert not re.search(r"<script[^>]*\bsrc=", page)
    for library in ("vega 5.20.2", "vega-lite 5.2.0", "vega-embed 6.18.2"):
        assert f"<!-- {library} (npm)" in page


def test_dvc_plots_show_writes_a_page_with_no_cdn_and_curves_without_blank_steps(tmp_path):
    out = tmp_path / "plots"
    proc = subprocess.run([sys.executable, "-m", "dvc", "plots", "show", "-o", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in html and not re.search(r"<script[^>]*\bsrc=", html)
    # each chart: `var spec = {...};` then `vegaEmbed('#id', spec);` ({} where a file lacks a field: a run of the
    # trainers' old curve format, kept until its profile runs again)
    specs = [json.loads(m) for m in re.findall(r"var spec = (\{.*?\});\s*vegaEmbed\(", html, flags=re.S)]
    specs = [s for s in specs if s]
    assert specs, "no chart in the page"
    for spec in specs:
        y = spec["encoding"]["y"]["field"]
        assert spec["transform"][0]["filter"] == f"isValid(datum['{y}']) && datum['{y}'] !== ''", spec["title"]
