"""Stage `generate`: a generator writes one problem per test problem of a fold, from its equation and context.

Context: the baselines (GPT, GPT-pre, seq2seq) get the heuristic keywords of the test problem; "ours" gets the
words its selector picks from the test problem (the `context` column; Table 5 samples it).

Batched decoding with the KV cache (mwpgen/lm/decoding.py); greedy / beam / top-p and the length cap are params,
seeded. The table has one row per test problem: fold, id, equation, context, reference, generated.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import (DATA, OURS, PROJECT_ROOT, SEQ2SEQ, all_models, fold_keywords, fold_name, params_or_exit,
                          stage_args)
from mwpgen.config import Params
from mwpgen.data.folds import load_fold
from mwpgen.io import write_generations
from mwpgen.ours.steps import JointExample
from mwpgen.lm.prompts import generator_prompt
from mwpgen.ours.bundle import bundle_settings
from mwpgen.seq2seq.baseline import read_not_run
from tasks import ours, seq2seq
from tasks.models import generate as generate_task
from tasks.tracking import fold_run


def _generate_ours(params: Params, bundle, test, dataset: str, fold: int) -> tuple[list[str], list[list[str]]]:
    """ours: the selector chooses each test problem's context (or, for Table 4's keyword rows, heuristic ones)."""
    context = bundle_settings(bundle)["context"]
    keywords = fold_keywords(dataset, fold, context, "test") if context != "selector" else {}
    examples = [JointExample(r["equation"], r["text"], tuple(keywords.get(r["id"], ()))) for r in test]
    return ours.generate(params, bundle, examples)


@flow(name="generate")
def generate(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, exp.max_train, exp.max_test, exp.seed)
    contexts = None  # ours picks its own context (_generate_ours); the baselines get heuristic keywords
    if not model.startswith(OURS):
        keywords = fold_keywords(dataset, fold, params.keywords.baseline_context, "test")
        contexts = [keywords[r["id"]] for r in data.test]
    name = fold_name(model, dataset, fold)
    checkpoint = PROJECT_ROOT / "models" / name
    with fold_run(model, dataset, fold, "generate") as run:
        run.params({f"generate.{k}": v for k, v in params.generate.model_dump().items()} | {"n_test": len(data.test)})
        start = time.time()
        if contexts is None:
            generated, contexts = _generate_ours(params, checkpoint, data.test, dataset, fold)
        elif model in SEQ2SEQ:
            reason = read_not_run(checkpoint)
            if reason:  # e.g. no GloVe vectors on an offline machine: an empty table, never a stand-in model
                log.warning("%s was not trained (%s): no generations", model, reason)
            equations = [r["equation"] for r in data.test]
            generated = [] if reason else seq2seq.generate_seq2seq(params, checkpoint, equations, contexts)
        else:
            prompts = [generator_prompt(r["equation"], c) for r, c in zip(data.test, contexts)]
            generated = generate_task(params, checkpoint, prompts)
        wall = time.time() - start
        rows = [{"fold": fold, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                 "reference": r["text"], "generated": g} for r, c, g in zip(data.test, contexts, generated)]
        out = PROJECT_ROOT / "results" / "generations" / f"{name}.csv"
        write_generations(out, rows)
        log.info("%d problems in %.1f s (%.2f problems/s)", len(rows), wall, len(rows) / max(wall, 1e-9))
        run.metrics({"generate_wall_s": wall, "problems_per_s": len(rows) / max(wall, 1e-9)})
        run.artifact(out, "generations")
    return {"n": len(rows), "wall_s": wall}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=all_models())
    generate(params_or_exit(args.params), args.model, args.dataset, args.fold)
