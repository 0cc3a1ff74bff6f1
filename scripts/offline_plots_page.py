"""Write .dvc/offline_plots.html: the page `dvc plots show` fills (`plots.html_template` in .dvc/config), with vega,
vega-lite and vega-embed inlined instead of loaded from a CDN, so the charts draw offline.

The versions are the ones DVC's own page loads (dvc_render/vega.py); the packages come from the npm registry:

    npm pack vega@5.20.2 vega-lite@5.2.0 vega-embed@6.18.2      # in an empty folder DIR
    python scripts/offline_plots_page.py DIR

Each library keeps its license (BSD-3-Clause) in a comment above its code.
"""

from __future__ import annotations

import argparse
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".dvc" / "offline_plots.html"
LIBRARIES = (("vega", "5.20.2", "build/vega.min.js"), ("vega-lite", "5.2.0", "build/vega-lite.min.js"),
             ("vega-embed", "6.18.2", "build/vega-embed.min.js"))
PAGE = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>mwpgen: DVC plots (offline)</title>
    <!-- Made by scripts/offline_plots_page.py. DVC's placeholder for its CDN script tags is left out on purpose:
         the libraries are below. -->
%s
    <style>
        table {
            border-spacing: 15px;
        }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def script(tarball: Path, name: str, version: str, member: str) -> str:
    with tarfile.open(tarball) as tar:
        code = tar.extractfile(f"package/{member}").read().decode("utf-8")
        license_text = tar.extractfile("package/LICENSE").read().decode("utf-8")
    if "</script" in code.lower():
        raise SystemExit(f"{tarball}: {member} holds '</script', which would end the inlined script early")
    return (f"    <!-- {name} {version} (npm), {member}; its license:\n{license_text.strip()}\n"
            f"    -->\n    <script>{code}</script>")


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("folder", type=Path, help="where `npm pack` left vega-*.tgz, vega-lite-*.tgz, vega-embed-*.tgz")
    args = cli.parse_args()
    scripts = [script(args.folder / f"{name}-{version}.tgz", name, version, member)
               for name, version, member in LIBRARIES]
    OUT.write_text(PAGE % "\n".join(scripts), encoding="utf-8")
    print(f"{OUT} ({OUT.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
