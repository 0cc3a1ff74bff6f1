"""Profiles: partial params files (profiles/*.yaml) overlaid onto params.yaml, validated before anything is written."""

from __future__ import annotations

import io
import os
from pathlib import Path

from mwpgen.config.files import ParamsError, parse_yaml, read_yaml
from mwpgen.config.schema import validate_params


def _merge(base: dict, override: dict, prefix: str = "") -> list[str]:
    changed = []
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            changed += _merge(base[key], value, f"{prefix}{key}.")
        elif base.get(key) != value:
            base[key] = value
            changed.append(f"{prefix}{key}={value!r}")
    return changed


def _merge_keeping_layout(doc, override: dict) -> None:
    """`_merge` on a ruamel.yaml round-trip document: values change, comments and layout stay."""
    from ruamel.yaml.comments import CommentedSeq

    for key, value in override.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            _merge_keeping_layout(doc[key], value)
        elif doc.get(key) != value:
            if isinstance(value, list):  # written [a, b] like the lists of params.yaml
                value = CommentedSeq(value)
                value.fa.set_flow_style()
            doc[key] = value


def resolve_profile(profile: str | os.PathLike, profiles_dir: str | os.PathLike) -> Path:
    """Where `--profile PROFILE` points: a bare name means profiles_dir/<name>.yaml; a path (one holding a "/", or a
    name ending in .yaml / .yml) is read as given, relative to the current directory, and must exist (ParamsError,
    with a hint when profiles_dir has a profile of that name); a missing bare name is apply_profile's error, which
    lists the profiles there."""
    text, profiles_dir = os.fspath(profile), Path(profiles_dir)
    if "/" in text or os.sep in text or text.endswith((".yaml", ".yml")):
        path = Path(text).expanduser()
        if not path.is_file():
            shipped = profiles_dir / f"{path.stem}.yaml"
            hint = f"; did you mean --profile {path.stem} ({shipped})?" if shipped.is_file() else ""
            where = "" if path.is_absolute() else f", relative to {Path.cwd()}"
            raise ParamsError(f"{path}: no such profile file (a profile given as a path is read as given{where})"
                              f"{hint}")
        return path
    return profiles_dir / f"{text}.yaml"


def apply_profile(params_path: str | os.PathLike, profile_path: str | os.PathLike) -> list[str]:
    """Overlay a profile (a partial params file) onto params.yaml, validated before anything is written.

    Returns the dotted keys that changed. params.yaml keeps its comments and layout (a ruamel.yaml round trip);
    only the changed values are rewritten.
    """
    from ruamel.yaml import YAML

    params_path, profile_path = Path(params_path), Path(profile_path)
    if not profile_path.is_file():
        available = sorted(p.stem for p in profile_path.parent.glob("*.yaml"))
        raise ParamsError(f"{profile_path}: no such profile (available in {profile_path.parent}: "
                          f"{', '.join(available) or 'none'})")
    text = params_path.read_text(encoding="utf-8")
    profile = read_yaml(profile_path)
    # An empty profile (or `[]`, a list, a scalar) is a mistake, not "nothing to change": refuse it before the
    # full pipeline starts on the unchanged params.yaml.
    if profile is None:
        raise ParamsError(f"{profile_path}: empty profile (expected a mapping of sections, e.g. `train: {{...}}`)")
    raw = parse_yaml(text, str(params_path)) or {}
    for name, doc in ((profile_path, profile), (params_path, raw)):
        if not isinstance(doc, dict):
            raise ParamsError(f"{name}: expected a mapping of sections, got {type(doc).__name__}")
    if not profile:
        raise ParamsError(f"{profile_path}: empty profile (an empty mapping: nothing to apply)")
    changed = _merge(raw, profile)
    validate_params(raw, f"{params_path} + {profile_path.name}")
    if changed:
        round_trip = YAML()
        round_trip.width = 4096  # never re-wrap a long comment or value
        doc = round_trip.load(text)
        _merge_keeping_layout(doc, profile)
        buf = io.StringIO()
        round_trip.dump(doc, buf)
        # the round trip must write exactly the validated values
        if parse_yaml(buf.getvalue(), str(params_path)) != raw:
            raise ParamsError(f"{params_path}: could not apply {profile_path.name} without changing other values")
        tmp = params_path.with_name(f".{params_path.name}.tmp-{os.getpid()}")
        tmp.write_text(buf.getvalue(), encoding="utf-8")
        os.replace(tmp, params_path)
    return changed
