"""`mwpgen generate` and the served model's code path: new problems from an equation and a few keywords.

- `request`: a request from untrusted input (command line, CSV / JSONL file, HTTP body), read and checked;
- `service`: a trained ours answering checked requests (the one path behind the CLI, the MLflow model and the
  studies that sample as the CLI does);
- `cli`: the `mwpgen generate` command line.

Kept inert (no imports) so that a stage importing one module does not depend on the others.
"""
