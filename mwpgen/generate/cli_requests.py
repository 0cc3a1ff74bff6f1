"""The requests of one `mwpgen generate` run: --equation and --context, or every row of --input FILE, each checked
(mwpgen.generate.request) before any model loads and numbered by where it came from, for messages."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from mwpgen.generate.cli_errors import EXIT_BAD_INPUT, CliError
from mwpgen.generate.request import Request, RequestError, parse_request, read_request_file

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
