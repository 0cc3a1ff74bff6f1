"""Which model and which judge `mwpgen generate` uses: --model and --judge as given, or the checkout's default run
(params.yaml's first dataset and fold, read at run time), with the help to give when that model is missing.

`--model` is a bundle folder, an MLflow model folder, an MLflow run id (the run that trained and logged it),
`runs:/RUN/mwpgen-ours` or `models:/mwpgen-ours/VERSION` (also `@alias`). An MLflow reference is fetched through
tracking/model_store.py, imported only then: the library never imports MLflow, and a bundle folder never loads it.

Which learned judge: --judge FOLDER when given; else the one an MLflow --model packages; else, for the checkout's
default model only (no --model), the default run's models/judge/<dataset>/fold<k> when train_judge adopted one there.
An explicit --model that packages no judge keeps the rule: a judge of this checkout was fitted beside this checkout's
model, not beside the one named.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, CliError
from mwpgen.generate.served_name import MLFLOW_MODEL_NAME
from mwpgen.paths import PROJECT_ROOT, FoldPaths
from mwpgen.registry import EVALUATOR, served_model

RULE = "rule"  # --judge rule: verify with the rule (mwpgen/judge/rule.py) even where a learned judge exists
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def default_served() -> tuple[str, int, str]:
    """The default run's (dataset, fold, served model): params.yaml's first dataset and fold (Arithmetic fold 0 and
    the schema's defaults without a params.yaml). An invalid params.yaml is a usage error naming its fault: the
    default model would otherwise be a guess."""
    from mwpgen.config.files import ParamsError
    from mwpgen.config.schema import Params, load_params

    params = Params()
    if (PROJECT_ROOT / "params.yaml").exists():
        try:
            params = load_params(PROJECT_ROOT / "params.yaml")
        except ParamsError as e:
            raise CliError(f"{e} (without --model, the model and its judge are the ones params.yaml names: fix it, "
                           "or give --model)", EXIT_BAD_INPUT) from None
    dataset, fold = params.experiment.datasets[0], params.experiment.folds[0]
    return dataset, fold, served_model(params, dataset, fold)


def default_model() -> Path:
    """The default run's served model: models/<served model>/<experiment.datasets[0]>/fold<experiment.folds[0]>."""

    dataset, fold, model = default_served()
    path = FoldPaths(PROJECT_ROOT, model, dataset, fold).model_dir
    if not (path / "ours.json").exists():
        raise CliError(no_model_help(path, dataset, fold, model), EXIT_FAILED)
    return path


def measured_cost(dataset: str, fold: int, model: str = "ours") -> str:
    """What training `model` took in this checkout's committed run, from the metrics it committed (none: nothing
    said)."""
    def minutes(name: str) -> float | None:
        path = FoldPaths(PROJECT_ROOT, name, dataset, fold).train_timing
        try:
            return json.loads(path.read_text(encoding="utf-8"))["wall_s"] / 60
        except (OSError, ValueError, KeyError, TypeError):
            return None

    evaluator, ours, tuned = minutes(EVALUATOR.name), minutes("ours"), minutes(model) if model != "ours" else 0.0
    if evaluator is None or ours is None or tuned is None:
        return ""
    tuning = f", then {tuned:.0f} min to tune it ({model})" if model != "ours" else ""
    return (
        f" The committed run's training took {evaluator:.0f} min for the evaluator (ours trains its own parser up "
        f"to the evaluator's parse accuracy) and {ours:.0f} min for ours{tuning} (timing/metrics/train/; README gives "
        "the machine)."
    )


def no_model_help(path: Path, dataset: str, fold: int, model: str = "ours") -> str:
    """What to do when the default run's served model is not there: train it, pull it, or point --model elsewhere."""
    stage = (
        f"train_ours@{dataset}-{fold}" if model == "ours" else f"tune@{model.removeprefix('ours-')}-{dataset}-{fold}"
    )
    what = "ours" if model == "ours" else f"{model} (ours tuned on blind readings)"
    return (
        f"no trained {what} model at {path} (the default run's served model, which `mwpgen generate` uses without "
        "--model; params.yaml: serve.model). To get one:\n"
        f"  - train it: `bash scripts/run.sh dvc repro {stage}` (DVC runs the data, keyword, evaluator and ours "
        f"stages it needs first; a CUDA GPU is used when there is one).{measured_cost(dataset, fold, model)} Or "
        "the whole default run, every model and the report: `bash scripts/run.sh python -m orchestration.pipeline`;"
        "\n"
        f"  - or, if a DVC remote holds the default run (.dvc/config, docs/many_machines.md): "
        f"`bash scripts/run.sh dvc pull {stage}`;\n"
        "  - or use another model: --model with a bundle folder (e.g. models/ours/<dataset>/fold<k>, ours untuned), "
        f"an MLflow run id, runs:/RUN/{MLFLOW_MODEL_NAME} or models:/{MLFLOW_MODEL_NAME}/VERSION (or @alias)."
    )


def mlflow_uri(spec: str) -> str | None:
    """The MLflow URI for a --model value, or None when it is not an MLflow reference."""
    if spec.startswith(("models:/", "runs:/")):
        return spec
    if _RUN_ID.fullmatch(spec):
        return f"runs:/{spec}/{MLFLOW_MODEL_NAME}"
    return None


def resolve_model(spec: str | None) -> Path:
    """The model folder for --model `spec`: the default run's, a folder, or an MLflow model fetched into a temporary
    folder removed at exit."""
    if spec is None:
        return default_model()
    path = Path(spec).expanduser()
    if path.exists():
        return path
    uri = mlflow_uri(spec)
    if uri is None:
        raise CliError(f"--model {spec!r}: no such folder, and not an MLflow run id, runs:/RUN/PATH or "
                       "models:/NAME/VERSION", EXIT_BAD_INPUT)
    ModelStoreError, download_model = checkout_model_store()
    dst = Path(tempfile.mkdtemp(prefix="mwpgen-model-"))
    atexit.register(shutil.rmtree, dst, True)
    try:
        return download_model(uri, dst)
    except ModelStoreError as e:
        raise CliError(f"--model {spec}: {e}", EXIT_BAD_INPUT) from None


def checkout_model_store():
    """tracking/model_store.py's ModelStoreError and download_model, imported only for an MLflow --model (only then
    is MLflow loaded). tracking/ is the checkout's, not the wheel's (pyproject.toml packages mwpgen alone), so it is
    found with the checkout root on sys.path: PROJECT_ROOT, the folder above mwpgen/ in an editable install, put
    first so that no other distribution's top-level `tracking` is taken for it."""
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    try:
        from tracking.model_store import ModelStoreError, download_model
    except ModuleNotFoundError as e:
        if e.name not in ("tracking", "tracking.model_store"):
            raise
        raise CliError(
            f"an MLflow --model needs the project's checkout (tracking/model_store.py), not found in "
            f"{PROJECT_ROOT}: install mwpgen editable from a clone (pip install -e .)",
            EXIT_FAILED,
        ) from None
    return ModelStoreError, download_model


def verifies(requests: Sequence) -> bool:
    """Whether any request (mwpgen.generate.request_input.Numbered) asks for --verify (only then is a judge read)."""
    return any(item.request.verify for item in requests)


def check_judge(spec: str | None, requests: Sequence) -> None:
    """An explicit --judge that no request uses, or that holds no learned judge (or a malformed one), as bad input
    before any model loads."""
    if spec is None:
        return
    if not verifies(requests):
        raise CliError(f"--judge {spec}: only --verify K reads a judge, and no request verifies; add --verify K "
                       "(or drop --judge)", EXIT_BAD_INPUT)
    if spec == RULE:
        return
    from mwpgen.judge.saved import has_judge, no_judge_reason, read_info

    path = Path(spec).expanduser()
    try:
        if has_judge(path):
            read_info(path)  # a malformed judge.json: named now, not after the model has loaded
            return
        why = no_judge_reason(path)
    except ValueError as e:
        raise CliError(f"--judge {spec}: {e}", EXIT_BAD_INPUT) from None
    raise CliError(f"--judge {spec}: not a learned judge ({why}); give a train_judge output "
                   f"(models/judge/<dataset>/fold<k>) or {RULE}", EXIT_BAD_INPUT)


def resolve_judge(spec: str | None, model_spec: str | None, model: Path) -> Path | None:
    """The learned judge's folder for --judge `spec` with --model `model_spec` (resolved: `model`); None for the rule.
    The one given; else the one an MLflow model packages; else, for the checkout's default model only
    (`model_spec` None), the default run's models/judge/<dataset>/fold<k> when train_judge adopted one there. A model
    named by --model is judged by what it packages or by the rule: this checkout's judge was fitted beside this
    checkout's default model, and nothing says it fits another."""
    from mwpgen.generate.service import packaged_judge
    from mwpgen.judge.saved import has_judge

    if spec == RULE:
        return None
    if spec is not None:
        return Path(spec).expanduser()
    packaged = packaged_judge(model)
    if packaged is not None or model_spec is not None:
        return packaged
    dataset, fold, _ = default_served()
    path = FoldPaths(PROJECT_ROOT, None, dataset, fold).judge
    return path if has_judge(path) else None  # no judge adopted for the fold (no_judge.json): the rule
