"""One home per default: every training setting's default lives in the schema (mwpgen/config/schema.py) alone.

The trainers take the schema's sections (or their fields, by the same names) and declare no default of their own for
a setting the schema owns: a second default is one that can disagree with it (as β once was 0.1 in the schema and
1.0 in a trainer's dataclass)."""

from __future__ import annotations

import ast
from pathlib import Path

from pydantic import BaseModel

from mwpgen.config import schema

ROOT = Path(__file__).resolve().parents[2]
TRAINING_SECTIONS = (schema.LMTrainParams, schema.GeneratorTrainParams, schema.EvaluatorTrainParams,
                     schema.OursTrainParams, schema.OursPhaseParams, schema.Seq2SeqTrainParams, schema.JudgeParams)
# The code that trains: whatever it declares for these names must come from the schema.
TRAINERS = ("mwpgen/trainer.py", "mwpgen/early_stopping.py", "mwpgen/log_window.py", "mwpgen/tuning.py",
            "mwpgen/lm/training.py", "mwpgen/seq2seq/train.py", "mwpgen/seq2seq/baseline.py",
            "mwpgen/lm/distributed.py", "mwpgen/judge/choose.py",
            *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "mwpgen/ours").glob("*.py")))


def owned_settings() -> set[str]:
    return {name for section in TRAINING_SECTIONS for name in section.model_fields}


def second_defaults(path: Path, names: set[str]) -> list[str]:
    """`file:line name=default` for each class field, or parameter of a trainer's entry point (`train_*`,
    `build_models`, `make_optimizers`), named like a schema setting that declares a default of its own."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs = []
        entry = isinstance(node, ast.FunctionDef) and (node.name.startswith("train_") or
                                                       node.name in ("build_models", "make_optimizers"))
        if entry:
            positional = node.args.posonlyargs + node.args.args
            pairs += zip([a.arg for a in positional[len(positional) - len(node.args.defaults):]], node.args.defaults)
            pairs += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        elif isinstance(node, ast.ClassDef):
            pairs += [(s.target.id, s.value) for s in node.body  # settings are scalars; a model field is not one
                      if isinstance(s, ast.AnnAssign) and s.value is not None and isinstance(s.target, ast.Name)
                      and ast.unparse(s.annotation).removesuffix(" | None") in ("int", "float", "str", "bool")]
        found += [f"{path.relative_to(ROOT)}:{d.lineno} {name}={ast.unparse(d)}" for name, d in pairs if name in names]
    return found


def test_trainers_declare_no_default_the_schema_owns():
    found = [hit for rel in TRAINERS for hit in second_defaults(ROOT / rel, owned_settings())]
    assert not found, "defaults declared beside the schema's:\n  " + "\n  ".join(found)


def test_a_second_default_is_caught(monkeypatch, tmp_path):
    (tmp_path / "x.py").write_text("from dataclasses import dataclass\n@dataclass\nclass C:\n    beta: float = 1.0\n"
                                   "def train_x(*, rho=0.1, seed=0):\n    pass\ndef decode(batch_size=64):\n    pass\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert sorted(h.split(" ", 1)[1] for h in second_defaults(tmp_path / "x.py", owned_settings())) == \
        ["beta=1.0", "rho=0.1"]


def test_params_yaml_states_the_schema_defaults():
    """The committed params.yaml is the default run: every value it writes is the schema's default, so the two
    cannot disagree (a profile changes params.yaml on purpose, not the schema)."""
    import subprocess

    from mwpgen.config.files import parse_yaml

    committed = subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=ROOT, capture_output=True, text=True)
    text = committed.stdout if committed.returncode == 0 else (ROOT / "params.yaml").read_text(encoding="utf-8")
    written = parse_yaml(text, "params.yaml")

    def differ(values: dict, model: BaseModel, prefix: str = "") -> list[str]:
        out = []
        for key, value in values.items():
            default = getattr(model, key)
            if isinstance(default, BaseModel):
                out += differ(value, default, f"{prefix}{key}.")
            elif value != default:
                out.append(f"{prefix}{key}: params.yaml {value!r}, schema {default!r}")
        return out

    assert not differ(written, schema.Params())
