"""`mwpgen generate`: new math word problems from an equation and a few keywords, with a trained ours.

    mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
    mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
    mwpgen generate --input requests.csv --format csv > problems.csv

Requests are read and checked by mwpgen.generate.request and answered by mwpgen.generate.service. Bad input (an
equation, a context, an option or a request file) is reported in one line on stderr with exit code 2, a missing or broken model with
exit code 1; a traceback only with MWPGEN_DEBUG=1.

`--model` is a bundle folder, an MLflow model folder, an MLflow run id (the run that trained and logged it),
`runs:/RUN/mwpgen-ours` or `models:/mwpgen-ours/VERSION` (also `@alias`). This library never imports mlflow: an
MLflow reference is fetched with mlflow's own command line (`python -m mlflow artifacts download`) into a
temporary folder, from MLFLOW_TRACKING_URI (default: the project's mlflow.db).
"""

from __future__ import annotations

import argparse
import atexit
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Sequence

from mwpgen.paths import PROJECT_ROOT
from mwpgen.generate.request import DECODINGS, NUMBER_MODES, RequestError, parse_request, read_request_file

MLFLOW_MODEL_NAME = "mwpgen-ours"  # the registered name and the logged model's name (tracking/pyfunc_model.py)
DEBUG_ENV = "MWPGEN_DEBUG"
EXIT_FAILED, EXIT_BAD_INPUT = 1, 2
_RUN_ID = re.compile(r"[0-9a-f]{32}")
CSV_COLUMNS = ("request", "rank", "given", "equation", "context", "text", "verified", "parsed_equation", "answer",
               "numbers", "log_likelihood", "masked_text")

EXAMPLES = """examples:
  mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
  mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
  mwpgen generate --input requests.csv --format csv > problems.csv
  mwpgen generate --model models:/mwpgen-ours/1 --equation "x = num1 + num2" --context "bus people"

request files: CSV with a header row, or JSONL with one object per line; the fields are equation, context and,
optionally, any of n, seed, numbers, verify, decoding, top_p, temperature, num_beams, max_new_tokens (the options
given on the command line are the defaults of every request).

exit codes: 0 done, 1 the model could not be loaded or generation failed, 2 bad input (the message names it)."""


class CliError(Exception):
    """One line for the user and the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + message; one line is enough (exit 2 as argparse)
        raise CliError(f"{message} (see {self.prog} --help)", EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    cli = _ArgumentParser(prog="mwpgen", description="Controllable math word problem generation "
                          "(Wang, Lan & Baraniuk, EMNLP 2021).")
    commands = cli.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_ArgumentParser)
    g = commands.add_parser("generate", help="write problems from an equation and keywords",
                            description="Write math word problems from an equation and context keywords with a "
                            "trained ours (generator + co-trained mwp2eq).", epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    what = g.add_argument_group("what to write (--equation and --context, or --input)")
    what.add_argument("--equation", "-e", help="masked, 'x = num1 - num2', or with numbers, 'x = 12 - 5' (masked for "
                      "the model, then written into the problem)")
    what.add_argument("--context", "-c", nargs="+", metavar="WORD", help="keywords the problem should use, e.g. "
                      "apples basket")
    what.add_argument("--input", "-i", type=Path, metavar="FILE", help="many requests: a .csv or .jsonl file")
    how = g.add_argument_group("how")
    how.add_argument("-n", type=int, help="problems per request (default 1)")
    how.add_argument("--seed", type=int, help="seed of sampling and of --numbers auto (default 0)")
    how.add_argument("--numbers", choices=NUMBER_MODES, help="auto: draw small integers for num1, num2, ... such "
                     "that x is a positive whole number, and print the answer (default given)")
    how.add_argument("--verify", type=int, metavar="K", help="sample K candidates (up to 32 pays here), keep those the "
                     "judge accepts (the co-trained mwp2eq reads back the equation, and the problem uses each number "
                     "once, asks a question and has a word for each operation), the most firmly read first "
                     "(default 0: no check)")
    how.add_argument("--decoding", choices=DECODINGS, help="default top_p")
    how.add_argument("--top-p", type=float, dest="top_p", help="nucleus mass (default 0.9)")
    how.add_argument("--temperature", type=float, help="default 1.0")
    how.add_argument("--num-beams", type=int, dest="num_beams", help="beams for --decoding beam (default 4)")
    how.add_argument("--max-new-tokens", type=int, dest="max_new_tokens", help="default 80")
    where = g.add_argument_group("model and output")
    where.add_argument("--model", "-m", help="bundle folder, MLflow model folder, MLflow run id, runs:/RUN/"
                       f"{MLFLOW_MODEL_NAME} or models:/{MLFLOW_MODEL_NAME}/VERSION (default: the default run's "
                       "trained ours, models/ours/<first dataset>/fold<first fold>)")
    where.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    where.add_argument("--format", "-f", default="text", choices=("text", "json", "csv"), help="default text")
    return cli


# ---------------------------------------------------------------------------------------------- requests

OPTION_FIELDS = ("n", "seed", "numbers", "verify", "decoding", "top_p", "temperature", "num_beams", "max_new_tokens")


def read_requests(args: argparse.Namespace) -> list:
    """Every request checked before the model loads, so a bad row costs nothing; errors name file and line."""
    defaults = {k: getattr(args, k) for k in OPTION_FIELDS if getattr(args, k) is not None}
    if args.input is not None:
        if args.equation is not None or args.context is not None:
            raise CliError("give --equation and --context, or --input, not both", EXIT_BAD_INPUT)
        requests = []
        for where, record in read_request_file(args.input):
            try:
                requests.append(parse_request(record, defaults))
            except RequestError as e:
                raise CliError(f"{where}: {e}", EXIT_BAD_INPUT) from None
        return requests
    if args.equation is None:
        raise CliError("give --equation (and --context), or --input FILE", EXIT_BAD_INPUT)
    context = " ".join(args.context) if args.context is not None else None
    return [parse_request({"equation": args.equation, "context": context}, defaults)]


# ---------------------------------------------------------------------------------------------- the model

def default_model() -> Path:
    """The default run's trained ours: models/ours/<experiment.datasets[0]>/fold<experiment.folds[0]>."""
    from mwpgen.config.files import ParamsError
    from mwpgen.config.schema import load_params
    from mwpgen.paths import FoldPaths

    dataset, fold = "arithmetic", 0
    if (PROJECT_ROOT / "params.yaml").exists():
        try:
            exp = load_params(PROJECT_ROOT / "params.yaml").experiment
            dataset, fold = exp.datasets[0], exp.folds[0]
        except ParamsError:
            pass
    path = FoldPaths(PROJECT_ROOT, "ours", dataset, fold).model_dir
    if not (path / "ours.json").exists():
        raise CliError(no_model_help(path, dataset, fold), EXIT_FAILED)
    return path


# Measured for the default run (Arithmetic fold 0) on a 2-core AVX512-BF16 CPU, from its stage logs: README "Results",
# the "Cost" item (tests/test_generate_cli.py checks these against README.md).
MEASURED_DATA_STAGES_S = 35  # download, translate, preprocess, split, keywords
MEASURED_TRAIN_EVALUATOR_MIN = 18.1  # train_ours needs the evaluator's parse accuracy (its parser gate)
MEASURED_TRAIN_OURS_S = 4668
MEASURED_DEFAULT_RUN_MIN = 139.1


def no_model_help(path: Path, dataset: str, fold: int) -> str:
    """What to do when the default run's ours is not there: train it, pull it, or point --model elsewhere."""
    stage = f"train_ours@{dataset}-{fold}"
    return (f"no trained ours model at {path} (the default run's ours, which `mwpgen generate` uses without --model)."
            " To get one:\n"
            f"  - train it: `bash scripts/run.sh dvc repro {stage}` (DVC runs the data and keyword stages it needs "
            f"first). Measured on a 2-core AVX512-BF16 CPU for the default run (README \"Results\"): "
            f"{MEASURED_DATA_STAGES_S / 60:.1f} min of data stages, {MEASURED_TRAIN_EVALUATOR_MIN} min for the "
            "evaluator (ours trains its own parser up to the evaluator's parse accuracy), then about "
            f"{MEASURED_TRAIN_OURS_S / 60:.0f} min for ours; a CUDA GPU is used when there is one. Or the whole "
            "default run, every model and the report: "
            f"`bash scripts/run.sh python -m orchestration.pipeline` ({MEASURED_DEFAULT_RUN_MIN} min there);\n"
            f"  - or, if a DVC remote holds the default run (.dvc/config, README \"Run on many machines\"): "
            f"`bash scripts/run.sh dvc pull {stage}`;\n"
            "  - or use another model: --model with a bundle folder, an MLflow run id, "
            f"runs:/RUN/{MLFLOW_MODEL_NAME} or models:/{MLFLOW_MODEL_NAME}/VERSION (or @alias).")


def mlflow_uri(spec: str) -> str | None:
    """The MLflow URI for a --model value, or None when it is not an MLflow reference."""
    if spec.startswith(("models:/", "runs:/")):
        return spec
    if _RUN_ID.fullmatch(spec):
        return f"runs:/{spec}/{MLFLOW_MODEL_NAME}"
    return None


def fetch_mlflow_model(uri: str, timeout_s: float = 900) -> Path:
    """Download an MLflow model with mlflow's command line into a temporary folder removed at exit."""
    env = dict(os.environ)
    env.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{PROJECT_ROOT / 'mlflow.db'}")
    dst = Path(tempfile.mkdtemp(prefix="mwpgen-model-"))
    atexit.register(shutil.rmtree, dst, True)
    cmd = [sys.executable, "-m", "mlflow", "artifacts", "download", "--artifact-uri", uri, "--dst-path", str(dst)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CliError(f"fetching {uri} from MLflow took more than {timeout_s:.0f} s", EXIT_FAILED) from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), lines[-1] if lines else "")
        raise CliError(f"could not fetch {uri} from MLflow at {env['MLFLOW_TRACKING_URI']}: {reason[:500]}",
                       EXIT_BAD_INPUT)
    return Path(proc.stdout.strip().splitlines()[-1])


def resolve_model(spec: str | None) -> Path:
    if spec is None:
        return default_model()
    path = Path(spec).expanduser()
    if path.exists():
        return path
    uri = mlflow_uri(spec)
    if uri is None:
        raise CliError(f"--model {spec!r}: no such folder, and not an MLflow run id, runs:/RUN/PATH or "
                       "models:/NAME/VERSION", EXIT_BAD_INPUT)
    return fetch_mlflow_model(uri)


# ---------------------------------------------------------------------------------------------- output

def _verified(p) -> str:
    if p.verified is None:
        return "not checked (no co-trained mwp2eq in this model)"
    return (f"{'yes' if p.verified else 'NO'} (judge: the co-trained mwp2eq reads {p.parsed_equation!r}; numbers "
            "and question checked)")


def format_text(problems: Sequence) -> str:
    out = []
    for p in problems:
        numbers = ", ".join(f"{k} = {v}" for k, v in p.numbers.items())
        out.append(f"[request {p.request + 1}, problem {p.rank}] {p.given}  | context: {p.context}\n"
                   f"{p.text}\n"
                   f"  verified: {_verified(p)}\n"
                   f"  answer: {'x = ' + p.answer if p.answer is not None else 'unknown until num tokens have values'}"
                   f"{'  (' + numbers + ')' if numbers else ''}  | log-likelihood per token: {p.log_likelihood:.3f}")
    return "\n\n".join(out) + "\n"


def format_csv(problems: Sequence) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for p in problems:
        writer.writerow(p.record() | {"numbers": " ".join(f"{k}={v}" for k, v in p.numbers.items())})
    return buf.getvalue()


def format_json(problems: Sequence) -> str:
    return json.dumps([p.record() for p in problems], indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------- main

def generate_command(args: argparse.Namespace) -> int:
    requests = read_requests(args)
    model = resolve_model(args.model)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from tqdm import tqdm
    from transformers.utils import logging as hf_logging

    from mwpgen.generate.service import Service

    hf_logging.disable_progress_bar()  # "Loading weights" bars: the model is small, the output is the point

    try:
        service = Service.load(model, args.device)
    except FileNotFoundError as e:  # a folder that holds no ours: a wrong --model (the default was checked)
        raise CliError(f"--model: {' '.join(str(e).split())}", EXIT_BAD_INPUT) from None
    except (OSError, ValueError, RuntimeError) as e:
        raise CliError(f"could not load the model at {model}: {' '.join(str(e).split())}", EXIT_FAILED) from None
    for i, request in enumerate(requests):
        try:
            service.check(request)
        except RequestError as e:
            raise CliError(f"{'' if len(requests) == 1 else f'request {i + 1}: '}{e}", EXIT_BAD_INPUT) from None
    problems = []
    for i, request in enumerate(tqdm(requests, desc="generating", unit="request", file=sys.stderr,
                                     disable=None if len(requests) > 1 else True)):
        problems += service.answer(request, i)
    sys.stdout.write({"text": format_text, "json": format_json, "csv": format_csv}[args.format](problems))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    debug = os.environ.get(DEBUG_ENV) == "1"
    try:
        args = build_parser().parse_args(argv)
        return generate_command(args)
    except CliError as e:
        message, code = str(e), e.code
    except RequestError as e:
        message, code = str(e), EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug or a broken environment: still one line, the traceback on request
        if debug:
            traceback.print_exc()
        message, code = f"{type(e).__name__}: {' '.join(str(e).split())}", EXIT_FAILED
        if not debug:
            message += f"  (traceback: {DEBUG_ENV}=1)"
    print(f"mwpgen: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
