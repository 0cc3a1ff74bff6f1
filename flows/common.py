"""What every stage flow does first: validate params.yaml (before any work) and open its MLflow run."""

from __future__ import annotations

import argparse
from pathlib import Path

from mwpgen.config import Params, ParamsError, load_params

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def stage_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", help="parameters file (validated before any work)")
    return parser.parse_args()


def params_or_exit(path: str) -> Params:
    try:
        return load_params(path)
    except ParamsError as e:
        raise SystemExit(f"error: {e}") from None
