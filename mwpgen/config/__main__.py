"""`python -m mwpgen.config`: every key of params.yaml with its type, default and help text."""

from __future__ import annotations

from pydantic import BaseModel

from mwpgen.config.schema import Params


def describe_params() -> str:
    """Every key with its type, default and help text (`python -m mwpgen.config`)."""
    out = []
    for section, field in Params.model_fields.items():
        out.append(f"{section}:")
        for name, f in field.annotation.model_fields.items():
            if isinstance(f.default, BaseModel):
                out.append(f"  {name}:")
                out += [
                    f"    {n} = {g.default!r}  # {g.description or ''}" for n, g in type(f.default).model_fields.items()
                ]
            else:
                out.append(f"  {name} = {f.default!r}  # {f.description or ''}")
    return "\n".join(out)


if __name__ == "__main__":
    print(describe_params())
