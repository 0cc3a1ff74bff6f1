"""`mwpgen generate`: new math word problems from an equation and a few keywords, with a trained ours.

    mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
    mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
    mwpgen generate --input requests.csv --format csv > problems.csv

Requests are read and checked by mwpgen.generate.request and answered by mwpgen.generate.service. Bad input (an
equation, a context, an option or a request file) is reported in one line on stderr with exit code 2, a missing or
broken model with exit code 1; a traceback only with MWPGEN_DEBUG=1.

Batches keep what they did. Each request's problems are written (and flushed) as soon as they are ready, so a
failure or Ctrl-C loses at most the request in progress: a failure names its request (file and line) and how many
were written, Ctrl-C says "interrupted after k of n requests" and exits 130. With `--output FILE` each request is
appended and synced, and FILE.partial (the progress marker: how many requests and bytes are complete, and a
fingerprint of the requests and options) is replaced atomically after it; `--resume` cuts FILE back to the last
complete request and continues with the next one. The marker is removed when the run finishes.
A request whose samples repeat each other gets fewer distinct problems than its n: said on stderr (exit 0).

`--verify K` ranks the K candidates by the learned judge or, without one, by the rule with the co-trained mwp2eq
(`--judge rule`). Which learned judge: `--judge FOLDER` when given; else the one an MLflow `--model` packages; else,
for the checkout's default model only (no `--model`), the default run's models/judge/<dataset>/fold<k> when
train_judge adopted one there. An explicit `--model` that packages no judge keeps the rule: a judge of this checkout
was fitted beside this checkout's model, not beside the one named. `--judge` without any request that verifies is
bad input (it would change nothing).

`--model` is a bundle folder, an MLflow model folder, an MLflow run id (the run that trained and logged it),
`runs:/RUN/mwpgen-ours` or `models:/mwpgen-ours/VERSION` (also `@alias`). This library never imports mlflow: an
MLflow reference is fetched with mlflow's own command line (`python -m mlflow artifacts download`) into a
temporary folder, from MLFLOW_TRACKING_URI (default: the project's mlflow.db).
"""

from __future__ import annotations

import argparse
import atexit
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from mwpgen.generate.request import DECODINGS, NUMBER_MODES, Request, RequestError, parse_request, read_request_file
from mwpgen.paths import PROJECT_ROOT
from mwpgen.registry import served_model

MLFLOW_MODEL_NAME = "mwpgen-ours"  # the registered name and the logged model's name (tracking/pyfunc_model.py)
DEBUG_ENV = "MWPGEN_DEBUG"
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 1, 2, 130
PARTIAL_SUFFIX = ".partial"  # FILE.partial: the progress marker of an unfinished --output FILE
_RUN_ID = re.compile(r"[0-9a-f]{32}")
# judge_probability last: it came after the others, and a reader of the earlier files may take columns by position
CSV_COLUMNS = ("request", "rank", "given", "equation", "context", "text", "verified", "parsed_equation", "answer",
               "numbers", "log_likelihood", "masked_text", "judge_probability")
RULE = "rule"  # --judge rule: verify with the rule (mwpgen/judge.py) even where a learned judge exists

EXAMPLES = """examples:
  mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
  mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
  mwpgen generate --input requests.csv --format csv > problems.csv
  mwpgen generate --model models:/mwpgen-ours/1 --equation "x = num1 + num2" --context "bus people"
  mwpgen generate --equation "x = num1 - num2" --context apples --verify 8 --judge models/judge/arithmetic/fold0

request files: CSV with a header row, or JSONL with one object per line; the fields are equation, context and,
optionally, any of n, seed, numbers, verify, decoding, top_p, temperature, num_beams, max_new_tokens (the options
given on the command line are the defaults of every request).

output: problems are written request by request as they are ready; with --output FILE an interrupted or failed
run continues with --resume (FILE.partial marks an unfinished FILE).

exit codes: 0 done (a request whose samples repeat each other gets fewer problems than its n, said on stderr),
1 the model could not be loaded or generation failed, 2 bad input (the message names it), 130 interrupted."""


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
    # Numbers are read as text by mwpgen.generate.request, as request files and the server are: one check, one
    # message naming the field (int() of a 5,000-digit --seed would raise, and argparse would echo every digit).
    how.add_argument("-n", help="problems per request (default 1)")
    how.add_argument("--seed", help="seed of sampling and of --numbers auto (default 0)")
    how.add_argument("--numbers", choices=NUMBER_MODES, help="auto: draw small integers for num1, num2, ... such "
                     "that x is a positive whole number, and print the answer (default given)")
    how.add_argument("--verify", metavar="K", help="sample K candidates (up to 32 pays here) and show first those "
                     "the judge accepts: the learned judge's probability that the problem encodes the equation, "
                     "highest first; with --judge rule, the co-trained mwp2eq reads back the equation and the problem "
                     "uses each number once, asks a question and has a word for each operation, the most firmly read "
                     "first (default 0: no check)")
    how.add_argument("--decoding", choices=DECODINGS, help="default top_p")
    how.add_argument("--top-p", dest="top_p", help="nucleus mass (default 0.9)")
    how.add_argument("--temperature", help="default 1.0")
    how.add_argument("--num-beams", dest="num_beams", help="beams for --decoding beam (default 4)")
    how.add_argument("--max-new-tokens", dest="max_new_tokens", help="default 80")
    where = g.add_argument_group("model and output")
    where.add_argument("--model", "-m", help="bundle folder, MLflow model folder, MLflow run id, runs:/RUN/"
                       f"{MLFLOW_MODEL_NAME} or models:/{MLFLOW_MODEL_NAME}/VERSION (default: the default run's "
                       "trained ours, models/ours/<first dataset>/fold<first fold>)")
    where.add_argument("--judge", metavar="FOLDER", help="with --verify: the learned judge to rank by (a train_judge "
                       "output, models/judge/<dataset>/fold<k>), or 'rule' (default: the one an MLflow --model "
                       "packages; without --model, models/judge/<first dataset>/fold<first fold> when it holds one; "
                       "else the rule)")
    where.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto")
    where.add_argument("--format", "-f", default="text", choices=("text", "json", "csv"), help="default text")
    where.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE (default: stdout); each "
                       f"request is appended as it finishes and FILE{PARTIAL_SUFFIX} marks the run unfinished")
    where.add_argument("--resume", action="store_true", help="continue the unfinished run that wrote --output FILE "
                       "(the same requests and options), skipping the requests it completed")
    return cli


# ---------------------------------------------------------------------------------------------- requests

OPTION_FIELDS = ("n", "seed", "numbers", "verify", "decoding", "top_p", "temperature", "num_beams", "max_new_tokens")


@dataclass(frozen=True)
class Numbered:
    """A checked request and where it came from, for messages (`requests.csv line 3`; empty for --equation)."""
    where: str
    request: Request


def read_requests(args: argparse.Namespace) -> list[Numbered]:
    """Every request checked before the model loads, so a bad row costs nothing; errors name file and line."""
    defaults = {k: getattr(args, k) for k in OPTION_FIELDS if getattr(args, k) is not None}
    if args.input is not None:
        if args.equation is not None or args.context is not None:
            raise CliError("give --equation and --context, or --input, not both", EXIT_BAD_INPUT)
        requests = []
        for where, record in read_request_file(args.input):
            try:
                requests.append(Numbered(where, parse_request(record, defaults)))
            except RequestError as e:
                raise CliError(f"{where}: {e}", EXIT_BAD_INPUT) from None
        return requests
    if args.equation is None:
        raise CliError("give --equation (and --context), or --input FILE", EXIT_BAD_INPUT)
    context = " ".join(args.context) if args.context is not None else None
    return [Numbered("", parse_request({"equation": args.equation, "context": context}, defaults))]


def named(item: Numbered, message: str) -> str:
    return f"{item.where}: {message}" if item.where else message


# ---------------------------------------------------------------------------------------------- the model

def default_served() -> tuple[str, int, str]:
    """The default run's (dataset, fold, served model): params.yaml's first dataset and fold (Arithmetic fold 0 and
    the schema's defaults without a params.yaml)."""
    from mwpgen.config.files import ParamsError
    from mwpgen.config.schema import Params, load_params

    params = Params()
    if (PROJECT_ROOT / "params.yaml").exists():
        try:
            params = load_params(PROJECT_ROOT / "params.yaml")
        except ParamsError:
            pass
    dataset, fold = params.experiment.datasets[0], params.experiment.folds[0]
    return dataset, fold, served_model(params, dataset, fold)


def default_model() -> Path:
    """The default run's served model: models/<served model>/<experiment.datasets[0]>/fold<experiment.folds[0]>."""
    from mwpgen.paths import FoldPaths

    dataset, fold, model = default_served()
    path = FoldPaths(PROJECT_ROOT, model, dataset, fold).model_dir
    if not (path / "ours.json").exists():
        raise CliError(no_model_help(path, dataset, fold, model), EXIT_FAILED)
    return path


def measured_cost(dataset: str, fold: int, model: str = "ours") -> str:
    """What training `model` took in this checkout's committed run, from the metrics it committed (none: nothing
    said)."""
    def minutes(name: str) -> float | None:
        path = PROJECT_ROOT / "metrics" / "train" / name / dataset / f"fold{fold}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))["timing"]["wall_s"] / 60
        except (OSError, ValueError, KeyError, TypeError):
            return None

    evaluator, ours, tuned = minutes("mwp2eq"), minutes("ours"), minutes(model) if model != "ours" else 0.0
    if evaluator is None or ours is None or tuned is None:
        return ""
    tuning = f", then {tuned:.0f} min to tune it ({model})" if model != "ours" else ""
    return (f" The committed run's training took {evaluator:.0f} min for the evaluator (ours trains its own parser up "
            f"to the evaluator's parse accuracy) and {ours:.0f} min for ours{tuning} (metrics/train/; README gives "
            "the machine).")


def no_model_help(path: Path, dataset: str, fold: int, model: str = "ours") -> str:
    """What to do when the default run's served model is not there: train it, pull it, or point --model elsewhere."""
    stage = f"train_ours@{dataset}-{fold}" if model == "ours" else f"tune@{model.removeprefix('ours-')}-{dataset}-{fold}"
    what = "ours" if model == "ours" else f"{model} (ours tuned on blind readings)"
    return (f"no trained {what} model at {path} (the default run's served model, which `mwpgen generate` uses without "
            "--model; params.yaml: serve.model). To get one:\n"
            f"  - train it: `bash scripts/run.sh dvc repro {stage}` (DVC runs the data, keyword, evaluator and ours "
            f"stages it needs first; a CUDA GPU is used when there is one).{measured_cost(dataset, fold, model)} Or "
            "the whole default run, every model and the report: `bash scripts/run.sh python -m orchestration.pipeline`;"
            "\n"
            f"  - or, if a DVC remote holds the default run (.dvc/config, docs/many_machines.md): "
            f"`bash scripts/run.sh dvc pull {stage}`;\n"
            "  - or use another model: --model with a bundle folder (e.g. models/ours/<dataset>/fold<k>, ours untuned), "
            f"an MLflow run id, runs:/RUN/{MLFLOW_MODEL_NAME} or models:/{MLFLOW_MODEL_NAME}/VERSION (or @alias).")


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


def verifies(requests: Sequence[Numbered]) -> bool:
    """Whether any request asks for --verify (only then is a judge read)."""
    return any(item.request.verify for item in requests)


def check_judge(spec: str | None, requests: Sequence[Numbered]) -> None:
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
    from mwpgen.paths import FoldPaths

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

def against_threshold(p: float, threshold: float, accepted: bool) -> str:
    """"0.62 < 0.71": p and the threshold to the fewest decimals (2 to 4) at which they differ as printed. The sign is
    the verdict's (`accepted`, reached on the unrounded p), never a comparison of rounded figures."""
    for digits in (2, 3, 4):
        shown, bar = f"{p:.{digits}f}", f"{threshold:.{digits}f}"
        if shown != bar:
            break
    return f"{shown} {'>=' if accepted else '<'} {bar}"


def _verified(p, threshold: float | None) -> str:
    if p.judge_probability is not None and threshold is not None and p.parsed_equation is not None:
        # a judge gated by the rule: a NO may be the rule's, so p and the threshold are shown without a verdict sign
        checked = ", numbers and question checked" if p.verified else ""
        return (f"{'yes' if p.verified else 'NO'} (learned judge gated by the rule: the co-trained mwp2eq reads "
                f"{p.parsed_equation!r}{checked}; p = {p.judge_probability:.2f}, threshold {threshold:.2f})")
    if p.judge_probability is not None and threshold is not None:
        return (f"{'yes' if p.verified else 'NO'} (p = {against_threshold(p.judge_probability, threshold, p.verified)}"
                ", learned judge)")
    return (f"{'yes' if p.verified else 'NO'} (judge: the co-trained mwp2eq reads {p.parsed_equation!r}; numbers "
            "and question checked)")


def _text_problem(p, threshold: float | None = None) -> str:
    numbers = ", ".join(f"{k} = {v}" for k, v in p.numbers.items())
    # verify 0: no check, no verdict
    verdict = f"  verified: {_verified(p, threshold)}\n" if p.verified is not None else ""
    return (f"[request {p.request + 1}, problem {p.rank}] {p.given}  | context: {p.context}\n"
            f"{p.text}\n"
            f"{verdict}"
            f"  answer: {'x = ' + p.answer if p.answer is not None else 'unknown until num tokens have values'}"
            f"{'  (' + numbers + ')' if numbers else ''}  | log-likelihood per token: {p.log_likelihood:.3f}")


def _csv_rows(problems: Sequence) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    for p in problems:
        writer.writerow(p.record() | {"numbers": " ".join(f"{k}={v}" for k, v in p.numbers.items())})
    return buf.getvalue()


class Format:
    """One output format written request by request: `start`, a `block` per request (`first`: no problem was
    written before it), then `end`; the pieces join into what one write of all the problems would be. `threshold`:
    the learned judge's, printed beside each p in text (JSON and CSV readers have the verdict and p)."""

    def __init__(self, name: str, threshold: float | None = None):
        self.name, self.threshold = name, threshold

    def start(self) -> str:
        return {"text": "", "json": "[\n", "csv": ",".join(CSV_COLUMNS) + "\n"}[self.name]

    def block(self, problems: Sequence, first: bool) -> str:
        if not problems:
            return ""
        if self.name == "csv":
            return _csv_rows(problems)
        if self.name == "json":
            items = [textwrap.indent(json.dumps(p.record(), indent=2, ensure_ascii=False), "  ") for p in problems]
            return ("" if first else ",\n") + ",\n".join(items)
        return ("" if first else "\n") + "\n\n".join(_text_problem(p, self.threshold) for p in problems) + "\n"

    def end(self, any_written: bool) -> str:
        return ("\n]\n" if any_written else "]\n") if self.name == "json" else ""


# ---------------------------------------------------------------------------------------------- where it goes

class Sink:
    """stdout: each request's problems flushed as soon as they are ready."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.done = 0  # requests complete
        self.any_written = False

    def start(self, text: str) -> None:
        self.write(text)

    def request_done(self, text: str, n_problems: int) -> None:
        self.write(text)
        self.done += 1
        self.any_written |= n_problems > 0

    def finish(self, text: str) -> None:
        self.write(text)

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def written(self) -> str:
        return "written above"

    def close(self) -> None:
        pass


class FileSink(Sink):
    """--output FILE: appended and synced per request; FILE.partial (replaced atomically) says how far it got."""

    def __init__(self, path: Path, fingerprint: str, total: int):
        super().__init__(open(path, "a", encoding="utf-8", newline=""))
        self.path, self.marker, self.fingerprint, self.total = path, partial_marker(path), fingerprint, total

    @classmethod
    def fresh(cls, path: Path, fingerprint: str, total: int) -> "FileSink":
        path.write_text("", encoding="utf-8")
        return cls(path, fingerprint, total)

    @classmethod
    def resumed(cls, path: Path, fingerprint: str, total: int, state: dict) -> "FileSink":
        with open(path, "r+b") as f:  # drop a request cut off half-written: only the marked bytes are complete
            # no request complete: start again from nothing, since the format's start is written again at done 0
            f.truncate(state["bytes"] if state["done"] else 0)
        sink = cls(path, fingerprint, total)
        sink.done, sink.any_written = state["done"], bool(state.get("any_written"))
        return sink

    def start(self, text: str) -> None:
        self.write(text)
        self.save_marker()

    def request_done(self, text: str, n_problems: int) -> None:
        super().request_done(text, n_problems)
        self.save_marker()

    def finish(self, text: str) -> None:
        self.write(text)
        self.stream.close()
        self.marker.unlink(missing_ok=True)

    def write(self, text: str) -> None:
        super().write(text)
        os.fsync(self.stream.fileno())  # the marker must never count bytes that a crash could still lose

    def save_marker(self) -> None:
        state = {"fingerprint": self.fingerprint, "requests": self.total, "done": self.done,
                 "bytes": self.stream.tell(), "any_written": self.any_written}
        tmp = self.marker.with_name(self.marker.name + ".tmp")
        tmp.write_text(json.dumps(state) + "\n", encoding="utf-8")
        os.replace(tmp, self.marker)  # atomic: a reader sees the old marker or the new one, never half of one

    def written(self) -> str:
        return f"written to {self.path}; continue with --resume"

    def close(self) -> None:
        if not self.stream.closed:
            self.stream.close()


def partial_marker(path: Path) -> Path:
    return path.with_name(path.name + PARTIAL_SUFFIX)


def judge_identity(judge: Path | None, model: Path) -> str:
    """The resolved judge as a resumed run must find it again: where it is (a judge the model packages: its place in
    the model, whose fetched copy moves to a new temporary folder on every run) and its judge.json (threshold,
    backbone, layer), so a judge retrained in place is another judge; "rule" without one."""
    from mwpgen.judge.saved import INFO_FILE

    if judge is None:
        return RULE
    judge = judge.resolve()
    where = judge.relative_to(model.resolve()) if judge.is_relative_to(model.resolve()) else judge
    try:
        info = (judge / INFO_FILE).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"the judge at {judge}: {INFO_FILE} cannot be read ({e})", EXIT_FAILED) from None
    return f"{where}\n{info}"


def run_fingerprint(args: argparse.Namespace, requests: Sequence[Numbered], judge: str = RULE) -> str:
    """What a resumed run must share with the run it continues: the checked requests, the model, the judge
    (`judge`: judge_identity) and the format."""
    described = [args.model, judge, args.format, *(repr(item.request) for item in requests)]
    return hashlib.sha256("\n".join(map(str, described)).encode()).hexdigest()


def check_output(args: argparse.Namespace) -> bool:
    """--output and --resume as bad input before any model is fetched or loaded; False when --resume finds the run
    already finished (nothing to do)."""
    if args.output is None:
        if args.resume:
            raise CliError("--resume needs --output FILE (the file the stopped run wrote)", EXIT_BAD_INPUT)
        return True
    path, marker = args.output, partial_marker(args.output)
    if path.is_dir():
        raise CliError(f"--output {path} is a directory; give a file", EXIT_BAD_INPUT)
    if not args.resume and marker.exists():
        raise CliError(f"--output {path} holds an unfinished run ({marker.name}); continue it with --resume, or "
                       "remove both files to start again", EXIT_BAD_INPUT)
    if args.resume and not marker.exists() and path.exists():
        print(f"mwpgen: nothing to resume: {path} has no {marker.name}, so the run that wrote it finished",
              file=sys.stderr)
        return False
    return True


def open_sink(args: argparse.Namespace, requests: Sequence[Numbered], fingerprint: str) -> Sink:
    """Where the problems go (check_output has passed): stdout, a fresh FILE, or the FILE of the run --resume
    continues, which must have been started with the same `fingerprint` (run_fingerprint)."""
    if args.output is None:
        return Sink(sys.stdout)
    path, marker = args.output, partial_marker(args.output)
    if not args.resume or not marker.exists():
        return FileSink.fresh(path, fingerprint, len(requests))
    state = read_marker(marker)
    if state.get("fingerprint") != fingerprint:
        raise CliError(f"--resume: {path} was started with other requests, options, model, judge or format; resume "
                       "with the same ones, or remove it and its marker to start again", EXIT_BAD_INPUT)
    if not path.exists() or path.stat().st_size < state["bytes"]:
        raise CliError(f"--resume: {path} is shorter than {marker.name} says it was; remove both to start again",
                       EXIT_BAD_INPUT)
    return FileSink.resumed(path, fingerprint, len(requests), state)


def read_marker(marker: Path) -> dict:
    try:
        state = json.loads(marker.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not all(isinstance(state.get(k), int) for k in ("done", "bytes")):
            raise ValueError("no counts")
        return state
    except (OSError, ValueError) as e:
        raise CliError(f"--resume: {marker} is unreadable ({e}); remove it and the output to start again",
                       EXIT_BAD_INPUT) from None


# ---------------------------------------------------------------------------------------------- main

def check_device(device: str) -> None:
    """--device cuda without a GPU, named as the option (the runtime's own message names params.yaml's key)."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise CliError("--device cuda: no CUDA device is visible here; use --device auto or cpu", EXIT_BAD_INPUT)


def load_service(model: Path, device: str, judge: Path | None = None):
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging as hf_logging

    from mwpgen.generate.service import Service

    hf_logging.disable_progress_bar()  # "Loading weights" bars: the model is small, the output is the point
    try:
        return Service.load(model, device, judge)
    except FileNotFoundError as e:  # a folder that holds no ours: a wrong --model (the default was checked)
        raise CliError(f"--model: {' '.join(str(e).split())}", EXIT_BAD_INPUT) from None
    except (OSError, ValueError, RuntimeError) as e:
        what = f"the model at {model}" + (f" or the judge at {judge}" if judge is not None else "")
        raise CliError(f"could not load {what}: {' '.join(str(e).split())}", EXIT_FAILED) from None


def generate_command(args: argparse.Namespace) -> int:
    requests = read_requests(args)
    check_device(args.device)
    check_judge(args.judge, requests)
    if not check_output(args):
        return 0
    model = resolve_model(args.model)
    # The judge only reads --verify's candidates: without one, it is not loaded.
    judge = resolve_judge(args.judge, args.model, model) if verifies(requests) else None
    sink = open_sink(args, requests, run_fingerprint(args, requests, judge_identity(judge, model)))
    try:
        return write_problems(args, requests, sink, model, judge)
    except KeyboardInterrupt:
        print(f"mwpgen: interrupted after {sink.done} of {len(requests)} requests "
              f"({sink.written() if sink.done else 'none written'})", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sink.close()


def write_problems(args: argparse.Namespace, requests: Sequence[Numbered], sink: Sink, model: Path,
                   judge: Path | None) -> int:
    from tqdm import tqdm

    service = load_service(model, args.device, judge)
    for item in requests:
        try:
            service.check(item.request)
        except RequestError as e:
            raise CliError(named(item, str(e)), EXIT_BAD_INPUT) from None
    form = Format(args.format, service.judge.info.threshold if service.judge is not None else None)
    if sink.done == 0:
        sink.start(form.start())
    todo = list(enumerate(requests))[sink.done:]
    for i, item in tqdm(todo, desc="generating", unit="request", file=sys.stderr,
                        disable=None if len(requests) > 1 else True):
        problems = answer_one(service, item, i, len(requests), sink)
        sink.request_done(form.block(problems, first=not sink.any_written), len(problems))
        if len(problems) < item.request.n:
            print(f"mwpgen: {named(item, f'request {i + 1}')}: asked for {item.request.n}, {len(problems)} distinct "
                  "(the samples repeated each other; a higher --temperature or more --verify candidates give more)",
                  file=sys.stderr)
    sink.finish(form.end(sink.any_written))
    return 0


def answer_one(service, item: Numbered, index: int, total: int, sink: Sink) -> list:
    """The request's problems; a failure names the request and says how much of the batch is kept."""
    label = item.where or (f"request {index + 1}" if total > 1 else "")
    try:
        return service.answer(item.request, index)
    except RequestError as e:
        message, code = str(e), EXIT_BAD_INPUT
    except Exception as e:  # a bug or a broken environment: one line naming the request, the traceback on request
        if os.environ.get(DEBUG_ENV) == "1":
            traceback.print_exc()
        message, code = f"generation failed: {type(e).__name__}: {' '.join(str(e).split())}", EXIT_FAILED
    kept = f" ({sink.done} of {total} requests {sink.written()})" if total > 1 else ""
    raise CliError(f"{label + ': ' if label else ''}{message}{kept}", code)


def main(argv: Sequence[str] | None = None) -> int:
    debug = os.environ.get(DEBUG_ENV) == "1"
    try:
        args = build_parser().parse_args(argv)
        return generate_command(args)
    except CliError as e:
        message, code = str(e), e.code
    except RequestError as e:
        message, code = str(e), EXIT_BAD_INPUT
    except KeyboardInterrupt:  # before any request was read
        print("mwpgen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
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
