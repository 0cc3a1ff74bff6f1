"""The one typed schema for `params.yaml`, validated before any stage does work.

Every section is a strict pydantic model: an unknown key, a wrong type or an out-of-range value raises
`ParamsError` whose message names the file, the dotted key and what is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DATASETS = ("arithmetic", "mawps", "math23k")
Dataset = Literal["arithmetic", "mawps", "math23k"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DownloadParams(Section):
    datasets: list[Dataset] = Field(list(DATASETS), min_length=1, description="Datasets to fetch.")
    mirror: str = Field(
        "../shared/data/raw",
        description="Folder mirroring the upstream files (relative to the project root or absolute); looked in "
        "before the upstream URL. The env var MWPGEN_MIRROR overrides it; an empty string disables the mirror.",
    )
    timeout_s: float = Field(60.0, gt=0, le=3600, description="Network timeout for one upstream download.")
    retries: int = Field(2, ge=0, le=10, description="Extra attempts for a failed upstream download.")


class TranslateParams(Section):
    provider: Literal["google"] = Field("google", description="deep-translator backend for cache misses.")
    source_lang: str = Field("zh-CN", min_length=2)
    target_lang: str = Field("en", min_length=2)
    seed_from_reference: bool = Field(
        True, description="Seed the cache with the paper authors' reference English translation of Math23K."
    )
    batch_size: int = Field(32, ge=1, le=1000, description="Texts per translator call; the cache is flushed after each.")
    timeout_s: float = Field(15.0, gt=0, le=600, description="Timeout of one translator call.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries of a failed translator call before giving up.")
    backoff_s: float = Field(2.0, ge=0, le=600, description="First retry delay; doubles on each retry.")


class PreprocessParams(Section):
    constants: list[float] = Field(
        [1, 2, 3.14, 0.01, 100, 12, 7],
        description="Numbers allowed in an equation without appearing in the problem text (kept as literal "
        "symbols: complement 1, doubling 2, pi, percent 0.01/100, dozen/months 12, week 7); any other unmatched "
        "number sends the record to quarantine.",
    )


class SplitParams(Section):
    n_folds: int = Field(5, ge=2, le=20, description="Cross-validation folds (the paper uses 5).")
    seed: int = Field(2021, ge=0, description="Seed of the MAWPS and Math23K fold assignment.")


class Params(Section):
    download: DownloadParams = DownloadParams()
    translate: TranslateParams = TranslateParams()
    preprocess: PreprocessParams = PreprocessParams()
    split: SplitParams = SplitParams()


class ParamsError(ValueError):
    """params.yaml is invalid; the message names every key at fault."""


def _allowed(model: type[BaseModel], loc: tuple) -> str:
    """Describe the keys allowed where an unknown key was found."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return ""
        model = field.annotation
    return "allowed keys: " + ", ".join(model.model_fields)


def _describe(error: dict) -> str:
    key = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key ({_allowed(Params, error['loc'])})"
    got = error.get("input")
    ctx = error.get("ctx") or {}
    expected = f" (allowed: {ctx['expected']})" if "expected" in ctx and ctx["expected"] not in error["msg"] else ""
    return f"{key}: {error['msg']}{expected}; got {got!r}"


def validate_params(raw: Any, source: str = "params.yaml") -> Params:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping of sections, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        lines = [_describe(err) for err in e.errors()]
        raise ParamsError(f"{source}: invalid parameters:\n  " + "\n  ".join(lines)) from None


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(f"{path}: file not found") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ParamsError(f"{path}{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    return validate_params(raw, str(path))


def describe_params() -> str:
    """Every key with its type, default and help text (`python -m mwpgen.config`)."""
    out = []
    for section, field in Params.model_fields.items():
        out.append(f"{section}:")
        for name, f in field.annotation.model_fields.items():
            out.append(f"  {name} = {f.default!r}  # {f.description or ''}")
    return "\n".join(out)


if __name__ == "__main__":
    print(describe_params())
