"""Stage `generate`: a generator writes one problem per test problem of a fold, from its equation and context.

Batched decoding with the KV cache (mwpgen/generate.py); greedy / beam / top-p and the length cap are params,
seeded. The table has one row per test problem: fold, id, equation, context, reference, generated.
"""

from __future__ import annotations

import csv
import io
import time

from prefect import flow, get_run_logger

from flows.common import DATA, GENERATORS, PROJECT_ROOT, fold_name, params_or_exit, stage_args
from mwpgen.config import Params
from mwpgen.experiment import load_fold
from mwpgen.io import atomic_write_text, read_jsonl
from mwpgen.lm_data import generator_prompt
from tasks.models import generate as generate_task
from tasks.tracking import fold_run

COLUMNS = ["fold", "id", "equation", "context", "reference", "generated"]


def write_table(path, rows: list[dict]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def read_table(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@flow(name="generate")
def generate(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, exp.max_train, exp.max_test, exp.seed)
    context = params.keywords.baseline_context
    keywords = {r["id"]: r[context] for r in read_jsonl(DATA / "keywords" / f"{fold_name(None, dataset, fold)}.jsonl")
                if r["split"] == "test"}
    name = fold_name(model, dataset, fold)
    with fold_run(model, dataset, fold, "generate") as run:
        run.params({f"generate.{k}": v for k, v in params.generate.model_dump().items()} | {"n_test": len(data.test)})
        prompts = [generator_prompt(r["equation"], keywords[r["id"]]) for r in data.test]
        start = time.time()
        generated = generate_task(params, PROJECT_ROOT / "models" / name, prompts)
        wall = time.time() - start
        rows = [{"fold": fold, "id": r["id"], "equation": r["equation"], "context": " ".join(keywords[r["id"]]),
                 "reference": r["text"], "generated": g} for r, g in zip(data.test, generated)]
        out = PROJECT_ROOT / "results" / "generations" / f"{name}.csv"
        write_table(out, rows)
        log.info("%d problems in %.1f s (%.2f problems/s)", len(rows), wall, len(rows) / max(wall, 1e-9))
        run.metrics({"generate_wall_s": wall, "problems_per_s": len(rows) / max(wall, 1e-9)})
        run.artifact(out, "generations")
    return {"n": len(rows), "wall_s": wall}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=GENERATORS)
    generate(params_or_exit(args.params), args.model, args.dataset, args.fold)
