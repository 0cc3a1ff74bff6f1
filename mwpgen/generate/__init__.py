"""`mwpgen generate` and the served model's code path: new problems from an equation and a few keywords.

- `request`: a request from untrusted input (command line, CSV / JSONL file, HTTP body), read and checked;
- `service`: a trained ours answering checked requests (the one path behind the CLI, the MLflow model and the
  studies that sample as the CLI does);
- the `mwpgen generate` command line in parts: `cli` (arguments and main), `cli_requests` (the run's requests),
  `model_resolution` (which model and judge: --model, --judge or the checkout's default run; an MLflow model is
  fetched through tracking/model_store.py), `output_format` (text, JSON, CSV), `output_file` (stdout or --output FILE,
  and --resume), `output_checks` and `output_lock` (the output checked up front; one writer at a time),
  `stop_signals` (SIGTERM as Ctrl-C), `cli_errors` (the one line and the exit code), `served_name` (the served
  model's MLflow name).

Kept inert (no imports) so that a stage importing one module does not depend on the others.
"""
