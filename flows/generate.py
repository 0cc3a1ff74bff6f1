"""Stage `generate`: a generator writes one problem per test problem of a fold, from its equation and context.

Context: the baselines (causal LMs, seq2seq) get the heuristic keywords of the test problem; ours gets the
words its selector picks from the test problem (the `context` column; Table 5 samples it).

Batched decoding with the KV cache (mwpgen/lm/decoding.py); greedy / beam / top-p and the length cap are params,
seeded. The table has one row per test problem: fold, id, equation, context, reference, generated.
"""

from __future__ import annotations

import time

from prefect import flow, get_run_logger

from flows.common import DATA, fold_keywords, fold_paths, params_or_exit, run_stage, stage_args
from mwpgen import registry
from mwpgen.config.schema import Params
from mwpgen.data.folds import load_fold
from mwpgen.io import write_generations
from mwpgen.paths import FoldPaths
from mwpgen.seq2seq.not_run import read_not_run
from tracking.runs import fold_run


def _generate_ours(params: Params, paths: FoldPaths, test) -> tuple[list[str], list[list[str]]]:
    """ours: the selector chooses each test problem's context (or, for Table 4's keyword rows, heuristic ones)."""
    from mwpgen.ours.bundle import bundle_settings  # these import torch (~1 s): only where a model decodes
    from mwpgen.ours.inputs import JointExample
    from tasks.generate import generate_ours

    context = bundle_settings(paths.model_dir)["context"]
    keywords = fold_keywords(paths, context, "test") if context != "selector" else {}
    examples = [JointExample(r["equation"], r["text"], tuple(keywords.get(r["id"], ()))) for r in test]
    return generate_ours(params, paths.model_dir, examples)


def _generate_baseline(params: Params, spec: registry.ModelSpec, paths: FoldPaths, test, log):
    """A baseline: the heuristic keywords of each test problem are its context."""
    keywords = fold_keywords(paths, params.keywords.baseline_context, "test")
    contexts = [keywords[r["id"]] for r in test]
    equations = [r["equation"] for r in test]
    if spec.decoder == "seq2seq" and (reason := read_not_run(paths.model_dir)):
        # e.g. no GloVe vectors on an offline machine: an empty table, never a stand-in model
        log.warning("%s was not trained (%s): no generations", spec.name, reason)
        return [], contexts
    from mwpgen.lm.prompts import generator_prompt  # these import torch (~1 s), which a not-run baseline does without
    from tasks.generate import generate_lm, generate_seq2seq

    if spec.decoder == "seq2seq":
        return generate_seq2seq(params, paths.model_dir, equations, contexts), contexts
    prompts = [generator_prompt(e, c) for e, c in zip(equations, contexts)]
    return generate_lm(params, paths.model_dir, prompts), contexts


@flow(name="generate")
def generate(params: Params, model: str, dataset: str, fold: int) -> dict:
    log = get_run_logger()
    spec = registry.spec(model)
    exp = params.experiment
    data = load_fold(DATA, dataset, fold, exp.max_train_of(dataset), exp.max_test_of(dataset), exp.seed)
    paths = fold_paths(model, dataset, fold)
    with fold_run(model, dataset, fold, "generate") as run:
        run.params({f"generate.{k}": v for k, v in params.generate.model_dump().items()} | {"n_test": len(data.test)})
        start = time.time()
        if spec.decoder == "ours":
            generated, contexts = _generate_ours(params, paths, data.test)
        else:
            generated, contexts = _generate_baseline(params, spec, paths, data.test, log)
        wall = time.time() - start
        rows = [{"fold": fold, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                 "reference": r["text"], "generated": g} for r, c, g in zip(data.test, contexts, generated)]
        write_generations(paths.generations, rows)
        log.info("%d problems in %.1f s (%.2f problems/s)", len(rows), wall, len(rows) / max(wall, 1e-9))
        run.metrics({"generate_wall_s": wall, "problems_per_s": len(rows) / max(wall, 1e-9)})
        run.artifact(paths.generations, "generations")
    return {"n": len(rows), "wall_s": wall}


if __name__ == "__main__":
    args = stage_args(__doc__, dataset=True, fold=True, models=registry.generator_names())
    run_stage(generate, params_or_exit(args.params), args.model, args.dataset, args.fold)
