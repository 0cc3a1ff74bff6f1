"""Where each raw file comes from: upstream repo, commit, path and sha256 (see ../shared/data/raw/SOURCES.md).

The checksums pin the exact bytes the paper's counts were checked against (1,492 / 2,373 / 23,162).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative path under the raw data folder and under the mirror
    repo: str
    commit: str
    upstream_path: str
    sha256: str
    zip_member: str | None = None  # the file is this member of a zip upstream

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.upstream_path}"


_ARITH = ("CogComp/arithmetic", "9c8b5855e9d25dc312f25569fccb740cab6ab61e")
_MAWPS = ("LYH-YF/MWPToolkit", "0993beb336c286a0f974d58834e932cf65e32249")
_M23K_ZH = ("qinzhuowu/MWPGen", "fe46d3c145480e5eb7b35b78baa7ae19c6e5e16b")
_M23K_EN = ("rsk25/PCMG", "dfaa61bd273f538d226c3c7260bae001c7543754")
_FOLD_SHA = (
    "0ae9142dc75d4464a9a816d42deec47c75d58ff759e551d1b145bcc424a7182a",
    "4b23937d7dc0b166008e9d2929fe07e3d198de633052562153ef6f15f7bac238",
    "59899bcc0dda2c30471a264202204d83d894ea02bc0512855c2557930273dfcf",
    "7bed9572aca4f79886f7a0783d4f51fb82280106688bf3d9427020c196d354a2",
    "889f71b4d450bf1e14a120e88eac9ffcc7d782f239b951514b89d3c4ae5ed4e2",
)

SOURCES: dict[str, tuple[SourceFile, ...]] = {
    "arithmetic": (
        SourceFile("arithmetic/questions.json", *_ARITH, "data/questions.json",
                   "a1fdbc08df5afe418ab0d72b530114712f20e73ed5a8ac9c4f5c3147e3272a25"),
        *(SourceFile(f"arithmetic/aggregate/fold{k}.txt", *_ARITH, f"data/aggregate/fold{k}.txt", sha)
          for k, sha in enumerate(_FOLD_SHA)),
    ),
    "mawps": (
        SourceFile("mawps/MAWPS.json", *_MAWPS, "dataset/mawps/MAWPS.json",
                   "00fbff19273045bba127ea4e881e381c813b4c452c139cf2c5c996addf131e9a"),
    ),
    "math23k": (
        SourceFile("math23k/Math_23K.json", *_M23K_ZH, "data/Math_23K.zip",
                   "efe5e761b92c3329e3504e1e97e2f84abd9a409330448ad89f404d4b1f39e986", zip_member="Math_23K.json"),
        # The English translation credited to the paper's first author; it seeds the translation cache.
        SourceFile("math23k_en/mwp.json", *_M23K_EN, "resource/dataset/math23k_preproc/archive/mwp.json",
                   "035315949839292050c198c9e7d5ce609e15bd268e1fff869f4f720e61bd5781"),
        SourceFile("math23k_en/eqs.json", *_M23K_EN, "resource/dataset/math23k_preproc/archive/eqs.json",
                   "2e2240adc3a6a2b88dd6e0d5cf8d4e851ced8bd715883046c1bb8ec2426f0f0e"),
    ),
}


def sources_for(datasets: list[str] | tuple[str, ...]) -> list[SourceFile]:
    return [f for d in datasets for f in SOURCES[d]]
