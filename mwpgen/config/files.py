"""Reading params and profile files: YAML 1.2, the YAML DVC itself reads and writes.

`dvc exp run -S train.ours.lr=3e-5` writes `lr: 3e-05`, a float in YAML 1.2 but a string to a YAML 1.1 reader such as
PyYAML's. Booleans are `true` / `false` only (YAML 1.1's yes/no/on/off are strings). A key given twice is an error,
not a silent "the last one wins". Every error is a `ParamsError` naming the file and the line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


class ParamsError(ValueError):
    """params.yaml is invalid; the message names every key at fault."""


def _check_unique_keys(node, source: str, path: tuple[str, ...] = (), seen_nodes: set | None = None) -> None:
    """Refuse a mapping key given twice (YAML forbids it; a lenient loader keeps the last one silently)."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:  # an alias: already checked where its anchor is
        return
    seen_nodes.add(id(node))
    if isinstance(node, MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else f"<{type(key_node).__name__}>"
            line = key_node.start_mark.line + 1
            if key in first_line and key != "<<":
                raise ParamsError(f"{source}:{line}: duplicate key {'.'.join((*path, key))} "
                                  f"(first given on line {first_line[key]})")
            first_line.setdefault(key, line)
            _check_unique_keys(value_node, source, (*path, key), seen_nodes)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, source, (*path, str(i)), seen_nodes)


def _long_integer(node, source: str, path: tuple[str, ...] = ()) -> str | None:
    """'file:line: key: an integer of N digits ...' for the first integer too long to read, or None."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if isinstance(node, ScalarNode) and node.tag.endswith(":int"):
        digits = sum(c.isdigit() for c in node.value)
        if digits > sys.get_int_max_str_digits():
            return (f"{source}:{node.start_mark.line + 1}: {'.'.join(path) or 'value'}: an integer of {digits:,} "
                    f"digits (at most {sys.get_int_max_str_digits():,} are read)")
    pairs = (node.value if isinstance(node, MappingNode) else
             [(str(i), item) for i, item in enumerate(node.value)] if isinstance(node, SequenceNode) else [])
    for key, value in pairs:
        key = key.value if isinstance(key, ScalarNode) else str(key)
        if found := _long_integer(value, source, (*path, key)):
            return found
    return None


def parse_yaml(text: str, source: str) -> Any:
    """Parse a params or profile file as YAML 1.2 (the YAML DVC reads and writes), refusing duplicate keys.

    Raises ParamsError naming `source`, the line (and column) and what is wrong."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    loader = YAML(typ="safe", pure=True)  # pure: the C parser would not honour YAML 1.2 everywhere
    try:
        node = loader.compose(text)
        if node is not None:
            _check_unique_keys(node, source)
        return YAML(typ="safe", pure=True).load(text)
    except ParamsError:
        raise
    except ValueError as e:  # an integer longer than Python reads (sys.get_int_max_str_digits): name its key
        raise ParamsError(_long_integer(node, source) or f"{source}: {e}") from None
    except YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        raise ParamsError(f"{source}{where}: invalid YAML: {getattr(e, 'problem', None) or e}") from None


def read_yaml(path: str | os.PathLike) -> Any:
    """`parse_yaml` of a file; a missing file is a ParamsError too."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParamsError(f"{path}: file not found") from None
    return parse_yaml(text, str(path))
