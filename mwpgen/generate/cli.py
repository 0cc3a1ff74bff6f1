"""`mwpgen generate`: new math word problems from an equation and a few keywords, with a trained ours.

    mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
    mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
    mwpgen generate --input requests.csv --format csv > problems.csv

This module holds the arguments and the run; the rest is in parts of their own: requests are read and checked by
mwpgen.generate.request and answered by mwpgen.generate.service; model_resolution picks the model and the judge
(--model, --judge or the checkout's default run); output_format lays problems out; output_file writes them and
resumes an unfinished --output FILE. Bad input (an equation, a context, an option or a request file) is reported in
one line on stderr with exit code 2, a missing or broken model with exit code 1; a traceback only with
MWPGEN_DEBUG=1.

Batches keep what they did. Each request's problems are written (and flushed) as soon as they are ready, so a
failure or Ctrl-C loses at most the request in progress: a failure names its request (file and line) and how many
were written, Ctrl-C says "interrupted after k of n requests" and exits 130; `--resume` continues an --output FILE.
A request whose samples repeat each other gets fewer distinct problems than its n: said on stderr (exit 0).

`--verify K` ranks the K candidates by the learned judge or, without one, by the rule with the co-trained mwp2eq
(`--judge rule`); `--judge` without any request that verifies is bad input (it would change nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from mwpgen.generate.cli_errors import DEBUG_ENV, EXIT_BAD_INPUT, EXIT_FAILED, CliError
from mwpgen.generate.cli_requests import Numbered, named, read_requests
from mwpgen.generate.model_resolution import check_judge, resolve_judge, resolve_model, verifies
from mwpgen.generate.output_checks import check_output_place, check_resume
from mwpgen.generate.output_file import PARTIAL_SUFFIX, Sink, judge_identity, open_sink, run_fingerprint
from mwpgen.generate.output_format import FORMATS, Format
from mwpgen.generate.output_lock import OutputLock
from mwpgen.generate.request import DECODINGS, MAX_VERIFY, NUMBER_MODES, RequestError
from mwpgen.generate.served_name import MLFLOW_MODEL_NAME
from mwpgen.generate.stop_signals import how_stopped, sigterm_as_interrupt

VERIFY_MEASURED = 32  # the largest K whose gain was measured (studies/verify_k: K = 1 / 8 / 32)

EXAMPLES = f"""examples:
  mwpgen generate --equation "x = 12 - 5" --context "apples basket" -n 2
  mwpgen generate --equation "x = num1 * num2" --context "boxes candies" --numbers auto --verify 8
  mwpgen generate --input requests.csv --format csv > problems.csv
  mwpgen generate --model models:/{MLFLOW_MODEL_NAME}/1 --equation "x = num1 + num2" --context "bus people"
  mwpgen generate --equation "x = num1 - num2" --context apples --verify 8 --judge models/judge/arithmetic/fold0

request files: CSV with a header row, or JSONL with one object per line; the fields are equation, context and,
optionally, any of n, seed, numbers, verify, decoding, top_p, temperature, num_beams, max_new_tokens (the options
given on the command line are the defaults of every request).

output: problems are written request by request as they are ready; with --output FILE an interrupted or failed
run continues with --resume (FILE.partial marks an unfinished FILE; FILE.lock, the run writing it; FILE.dropped
keeps what --resume cut after the last complete request).

exit codes: 0 done (a request whose samples repeat each other gets fewer problems than its n, said on stderr),
1 the model could not be loaded or generation failed, 2 bad input (the message names it), 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM; the same message, and --resume continues an --output FILE)."""


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
    how.add_argument("--verify", metavar="K", help=f"sample K candidates (measured up to {VERIFY_MEASURED}, "
                     f"{MAX_VERIFY} at most) and show first those the judge accepts: the learned judge's "
                     "probability that the problem encodes the equation, highest first; with --judge rule, the "
                     "co-trained mwp2eq reads back the equation and the problem uses each number once, asks a "
                     "question and has a word for each operation, the most firmly read first (default 0: no check)")
    how.add_argument("--decoding", choices=DECODINGS, help="default top_p")
    how.add_argument("--top-p", dest="top_p", help="nucleus mass (default 0.9)")
    how.add_argument("--temperature", help="0.01 to 10 (default 1.0)")
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
    where.add_argument("--format", "-f", default="text", choices=FORMATS, help="default text")
    where.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE (default: stdout); each "
                       f"request is appended as it finishes and FILE{PARTIAL_SUFFIX} marks the run unfinished")
    where.add_argument("--resume", action="store_true", help="continue the unfinished run that wrote --output FILE "
                       "(the same requests and options), skipping the requests it completed")
    return cli


# ---------------------------------------------------------------------------------------------- main

def check_device(device: str) -> None:
    """--device cuda without a GPU, named as the option (mwpgen.device's own message names params.yaml's key)."""
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
    check_output_place(args)
    lock = OutputLock(args.output).acquire() if args.output is not None else None
    try:
        return generate_into_output(args, requests) if check_resume(args) else 0
    finally:
        if lock is not None:
            lock.release()


def generate_into_output(args: argparse.Namespace, requests: Sequence[Numbered]) -> int:
    """The run, with the output checked (and, for --output FILE, held by this run)."""
    model = resolve_model(args.model)
    # The judge only reads --verify's candidates: without one, it is not loaded.
    judge = resolve_judge(args.judge, args.model, model) if verifies(requests) else None
    sink = open_sink(args, requests, run_fingerprint(args, requests, judge_identity(judge, model)))
    try:
        return write_problems(args, requests, sink, model, judge)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (stop_signals)
        stopped, code = how_stopped(e)
        print(f"mwpgen: {stopped} after {sink.done} of {len(requests)} requests "
              f"({sink.written() if sink.done else 'none written'})", file=sys.stderr)
        return code
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
    form = Format(args.format)
    widest = max((item.request.verify for item in requests), default=0)
    if widest > VERIFY_MEASURED:  # a long silence otherwise: one request can take minutes
        print(f"mwpgen: --verify {widest}: a request draws and judges {widest} candidates, its time growing with "
              f"them; what more candidates buy was measured up to {VERIFY_MEASURED} (studies/verify_k)",
              file=sys.stderr)
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
        with sigterm_as_interrupt():
            args = build_parser().parse_args(argv)
            return generate_command(args)
    except CliError as e:
        message, code = str(e), e.code
    except RequestError as e:
        message, code = str(e), EXIT_BAD_INPUT
    except KeyboardInterrupt as e:  # before the model was loaded
        stopped, code = how_stopped(e)
        print(f"mwpgen: {stopped}", file=sys.stderr)
        return code
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
