"""Issue 14's GPU check: the default profile's evaluator, GPT-pre and ours trained on one CUDA machine with the
settings of params.yaml, their test problems generated and parsed as the `train_evaluator`, `train_generator`,
`train_ours` and `generate` stages do; then, back on the CPU machine, scored as the `evaluate` stage does and written as
tables.

    python -m studies.gpu.gpu_default_profile train --out $OUT                   # on the GPU machine
    python -m studies.gpu.gpu_default_profile score studies/gpu/default-profile    # here, afterwards

`train` uses `mwpgen` only (no Prefect, MLflow or DVC), so it runs on a bare GPU machine with torch and
transformers. It follows flows/train_evaluator.py and flows/train_generator.py (evaluator, chosen by its validation
parse accuracy; GPT-pre with the fold's noun keywords), flows/train_ours.py and flows/generate.py step for step, with
the same params, data, fold, validation slice and seed; only the trackers are missing. The trained models stay on that
machine: what comes back is each generator's generations table, the GPU evaluator's parses of them and of the real test
problems, and summary.json (timings, validation curves, device). The summary is rewritten after every model, so a run
cut short still returns what it finished.

`score` computes BLEU-4 / METEOR / ROUGE-L / novelty / Dist-3 (pycocoevalcap needs Java, so here, not there),
ACC-eq (exact and equivalent) twice — by the GPU-trained evaluator's parses and by this machine's default-run
evaluator (models/evaluator/<dataset>/fold<k>) — the paired bootstrap of ours minus GPT-pre, and ours' selection
statistics (Table 5's), into scores.json and tables.md in the same folder.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from mwpgen.config.schema import load_params
from mwpgen.data.folds import load_fold
from mwpgen.io import read_generations, read_jsonl, write_generations, write_json, write_jsonl

DATASET, FOLD = "arithmetic", 0
GENERATORS = ("gpt_pre", "ours")


def _stop_words_fallback(path: Path) -> None:
    """mwpgen.data.keywords reads spaCy's stopword list; a bare GPU machine has no spaCy. The same list, exported
    here (`sorted(STOP_WORDS)` as JSON), stands in for the one module it imports."""
    try:
        import spacy.lang.en.stop_words  # noqa: F401 — only whether it imports
    except ImportError:
        import types
        module = types.ModuleType("spacy.lang.en.stop_words")
        module.STOP_WORDS = set(json.loads(path.read_text(encoding="utf-8")))
        for name in ("spacy", "spacy.lang", "spacy.lang.en"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["spacy.lang.en.stop_words"] = module


class Summary:
    """summary.json, rewritten after every step so a run cut short still says what it finished."""

    def __init__(self, path: Path, **fields):
        self.path, self.data = path, dict(fields)
        self.write()

    def write(self) -> None:
        write_json(self.path, self.data)


def train(args) -> None:
    import torch

    from mwpgen.data.equations import equivalent
    from mwpgen.device import resolve_device
    from mwpgen.evaluation.metrics import acc_eq, equation_symbols, most_frequent_equation
    from mwpgen.lm import decoding
    from mwpgen.lm.loading import DEFAULT_MODEL_CACHE, load_model_and_tokenizer, load_trained
    from mwpgen.lm.prompts import generator_epochs, generator_example, generator_prompt, mwp2eq_examples
    from mwpgen.lm.training import train_causal_lm
    from mwpgen.ours.bundle import generate_with_context, load_bundle
    from mwpgen.ours.inputs import JointExample, epoch_examples
    from mwpgen.ours.train_and_save import train_and_save

    params = load_params(args.params)
    exp, g = params.experiment, params.generate
    device = resolve_device(params.train.device)
    data = load_fold(args.data, DATASET, FOLD, exp.max_train_of(DATASET), exp.max_test_of(DATASET), exp.seed,
                     validation_size=exp.validation_size)
    keywords = {r["id"]: r for r in read_jsonl(args.data / "keywords" / DATASET / f"fold{FOLD}.jsonl")}
    baseline_kw = {i: r[params.keywords.baseline_context] for i, r in keywords.items()}
    out, models = args.out, args.models
    out.mkdir(parents=True, exist_ok=True)
    summary = Summary(out / "summary.json", dataset=DATASET, fold=FOLD, device=(
        torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu"),
        torch=torch.__version__, model=params.train.model, n_train=len(data.train),
        n_validation=len(data.validation), n_test=len(data.test), params=params.train.model_dump(), stages={})
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    test_problems = [r["text"] for r in data.test]
    references = [r["equation"] for r in data.test]

    def fine_tune(cfg, pretrained: bool, examples, validation, model_dir: Path, val_score=None) -> dict:
        """tasks/models.fine_tune without the tracker."""
        model, tokenizer = load_model_and_tokenizer(params.train.model, DEFAULT_MODEL_CACHE, pretrained=pretrained,
                                                    device=device, seed=exp.seed)
        return train_causal_lm(
            model, tokenizer, examples, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
            max_length=cfg.max_length, seed=exp.seed, device=device, mixed_precision=params.train.mixed_precision,
            checkpoint_dir=model_dir, log_every=params.train.log_every,
            on_log=lambda rec: print(f"  step {rec['step']} loss {rec['train_loss']:.4f}", flush=True),
            max_steps=cfg.max_steps, grad_accum=cfg.grad_accum, validation=validation,
            eval_every=cfg.eval_every, patience=cfg.patience, resume_dir=model_dir.with_name(model_dir.name + "-state"),
            save_every=cfg.save_every, val_score=val_score,
            on_eval=lambda rec: print(f"  eval {rec}", flush=True))

    def stage(name: str, result: dict, start: float, **extra) -> None:
        summary.data["stages"][name] = {
            "wall_s": round(time.time() - start, 1), "steps": result.get("steps"), "best_step": result.get("best_step"),
            "best_val_loss": result.get("best_val_loss"), "best_val_score": result.get("best_val_score"),
            "stopped_early": result.get("stopped_early"), "precision": result.get("precision"),
            "val": result.get("val"), **extra}
        if device == "cuda":
            summary.data["peak_gpu_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        summary.write()
        print(f"{name}: {json.dumps({k: v for k, v in summary.data['stages'][name].items() if k != 'val'})}",
              flush=True)

    evaluator_dir = models / "evaluator"

    def train_evaluator():
        """1. The evaluator (flows/train_evaluator.py, model evaluator): its checkpoint is the one of best validation
        parse accuracy. Returns that accuracy (ours' gate target, as flows/train_ours.py reads it) and its parser."""
        start = time.time()
        cfg = params.train.evaluator
        val_problems, val_refs = [r["text"] for r in data.validation], [r["equation"] for r in data.validation]
        val_score = None
        if cfg.checkpoint_by == "parse_accuracy" and data.validation:
            def val_score(model, tokenizer) -> float:
                parsed = decoding.predict_equations(model, tokenizer, val_problems, batch_size=g.batch_size)
                return acc_eq(parsed, val_refs)
        result = fine_tune(cfg, True, mwp2eq_examples(data.train), mwp2eq_examples(data.validation), evaluator_dir,
                           val_score)
        train_s = time.time() - start
        evaluator, evaluator_tok = load_trained(evaluator_dir, device)

        def parse(problems: list[str]) -> list[str]:
            return decoding.predict_equations(evaluator, evaluator_tok, problems, batch_size=g.batch_size)

        parsed = parse(test_problems)
        chance = most_frequent_equation(data.train)
        write_jsonl(out / "oracle.jsonl", [{"id": r["id"], "equation": r["equation"], "parsed": p,
                                            "correct": equation_symbols(p) == equation_symbols(r["equation"]),
                                            "equivalent": equivalent(p, r["equation"])}
                                           for r, p in zip(data.test, parsed)])
        stage("train_evaluator", result, start, train_s=round(train_s, 1),
              oracle_acc_eq=acc_eq(parsed, references),
              oracle_acc_eq_equivalent=acc_eq(parsed, references, equivalent_too=True),
              chance_equation=chance, chance_acc_eq=acc_eq([chance] * len(references), references),
              chance_acc_eq_equivalent=acc_eq([chance] * len(references), references, equivalent_too=True))
        return result.get("best_val_score"), parse

    if args.evaluator_metrics:
        # ours alone: its co-trained mwp2eq learns up to the committed evaluator's accuracy, as in the pipeline;
        # nothing is parsed there (`score` parses with this machine's evaluator)
        mwp2eq_target = float(json.loads(args.evaluator_metrics.read_text(encoding="utf-8"))["best_val_parse_accuracy"])
        parse = None
        summary.data["mwp2eq_target"] = {"from": str(args.evaluator_metrics), "accuracy": mwp2eq_target}
    else:
        mwp2eq_target, parse = train_evaluator()

    def record_generations(model: str, generated: list[str], contexts, start: float, result: dict, **extra) -> None:
        gen_s = time.time() - start
        write_generations(out / f"generations_{model}.csv",
                          ({"fold": FOLD, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                            "reference": r["text"], "generated": t} for r, c, t in zip(data.test, contexts, generated)))
        if parse is None:
            stage(model, result, start, generate_s=round(gen_s, 1), **extra)
            return
        parses = parse(generated)
        write_jsonl(out / f"parses_{model}.jsonl", [{"id": r["id"], "parsed": p} for r, p in zip(data.test, parses)])
        stage(model, result, start, generate_s=round(gen_s, 1), gpu_evaluator_acc_eq=acc_eq(parses, references),
              gpu_evaluator_acc_eq_equivalent=acc_eq(parses, references, equivalent_too=True), **extra)

    # 2. GPT-pre (flows/train_generator.py): the fold's noun keywords with dropout per epoch; validation without
    # dropout.
    if "gpt_pre" in args.generators:
        start = time.time()
        cfg = params.train.generator
        validation = [generator_example(r["equation"], baseline_kw[r["id"]], r["text"]) for r in data.validation]
        result = fine_tune(cfg, True, generator_epochs(data.train, baseline_kw, p=params.keywords.dropout,
                                                       seed=exp.seed), validation, models / "gpt_pre")
        train_s = time.time() - start
        model, tokenizer = load_trained(models / "gpt_pre", device)
        contexts = [baseline_kw[r["id"]] for r in data.test]  # flows/generate.py
        gen_start = time.time()
        generated = decoding.generate_texts(
            model, tokenizer, [generator_prompt(r["equation"], c) for r, c in zip(data.test, contexts)],
            batch_size=g.batch_size, decoding=g.decoding, num_beams=g.num_beams, top_p=g.top_p,
            temperature=g.temperature, max_new_tokens=g.max_new_tokens, seed=exp.seed)
        del model
        record_generations("gpt_pre", generated, contexts, gen_start, result, train_s=round(train_s, 1))

    # 3. ours (flows/train_ours.py): selector + generator + co-trained mwp2eq, phase 1 then phase 2.
    if "ours" in args.generators:
        start = time.time()
        cfg = params.train.ours
        context_kw = ({i: r[cfg.context] for i, r in keywords.items()} if cfg.context != "selector" else None)
        validation = [JointExample(r["equation"], r["text"], tuple(context_kw[r["id"]]) if context_kw else ())
                      for r in data.validation]
        result = train_and_save(cfg, epoch_examples(data.train, context_kw, params.keywords.dropout, exp.seed),
                            model_id=params.train.model, device=device, seed=exp.seed,
                            mixed_precision=params.train.mixed_precision, log_every=params.train.log_every,
                            bundle_dir=models / "ours", resume_dir=models / "ours-state", evaluator_dir=evaluator_dir,
                            validation=validation, dropout=params.keywords.dropout,
                            selector_keywords=[keywords[r["id"]]["tfidf"] for r in data.train],
                            mwp2eq_target=mwp2eq_target if cfg.equation_loss and validation else None)
        train_s = time.time() - start
        generator, tokenizer, selector, settings = load_bundle(models / "ours", device)
        tests = [JointExample(r["equation"], r["text"], tuple(context_kw[r["id"]]) if context_kw else ())
                 for r in data.test]
        gen_start = time.time()
        generated, contexts = generate_with_context(
            generator, tokenizer, selector, tests, width=settings["context_tokens"], threshold=settings["threshold"],
            max_problem_tokens=settings["max_problem_tokens"], batch_size=g.batch_size, decoding=g.decoding,
            num_beams=g.num_beams, top_p=g.top_p, temperature=g.temperature, max_new_tokens=g.max_new_tokens,
            seed=exp.seed)
        steps = result["history"]
        phase_s = {p: round(sum(h["step_s"] for h in steps if h["phase"] == p), 1) for p in (1, 2)}
        record_generations(
            "ours",
            generated,
            contexts,
            gen_start,
            {"steps": sum(result["steps_run"]), "val": result["validations"]},
            train_s=round(train_s, 1),
            phase_steps=list(result["steps_run"]),
            scheduled_steps=list(result["scheduled_steps"]),
            phase_step_s_total=phase_s,
            best_steps=result["best_steps"],
            mwp2eq_gate=result.get("mwp2eq_gate"),
            mwp2eq_val_accuracy=result.get("mwp2eq_val_accuracy"),
        )


def score(args) -> None:
    from mwpgen.evaluation.metrics import TextScorer, score_generations
    from mwpgen.evaluation.statistics import paired_bootstrap, selection_summary
    from mwpgen.evaluation.tables import delta_text
    from mwpgen.judge.rule import judge_predictions
    from mwpgen.lm.decoding import predict_equations
    from mwpgen.lm.loading import load_trained

    params = load_params(args.params)
    folder = args.folder
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    training_texts = [r["text"] for r in load_fold(args.data, DATASET, FOLD).train]
    evaluator, tokenizer = load_trained(args.evaluator, "cpu")
    keywords = {r["id"]: r for r in read_jsonl(args.data / "keywords" / DATASET / f"fold{FOLD}.jsonl")}
    scores, predictions = {}, {}
    with TextScorer(params.evaluate.meteor_timeout_s, params.evaluate.max_hypothesis_chars) as scorer:
        for model in GENERATORS:
            table = folder / f"generations_{model}.csv"
            if not table.exists():
                continue
            rows = read_generations(table)
            cpu_parses = predict_equations(evaluator, tokenizer, [r["generated"] for r in rows])
            by_cpu, predictions[model] = score_generations(rows, cpu_parses, training_texts, scorer)
            by_cpu["consistency_judged"] = judge_predictions(predictions[model])
            by_cpu.pop("timings_s")
            scores[model] = {**by_cpu, "acc_eq_gpu_evaluator": None, "acc_eq_equivalent_gpu_evaluator": None,
                             "n": len(rows)}
            gpu_parses_file = folder / f"parses_{model}.jsonl"  # absent where the evaluator was not trained there
            if gpu_parses_file.exists():
                gpu_parses = {r["id"]: r["parsed"] for r in read_jsonl(gpu_parses_file)}
                by_gpu, _ = score_generations(rows, [gpu_parses[r["id"]] for r in rows], training_texts, scorer)
                scores[model] |= {"acc_eq_gpu_evaluator": by_gpu["acc_eq"],
                                  "acc_eq_equivalent_gpu_evaluator": by_gpu["acc_eq_equivalent"]}
            if model == "ours":
                scores[model]["selection"] = selection_summary(
                    [r["context"].split() for r in rows], [keywords[r["id"]]["noun"] for r in rows],
                    [keywords[r["id"]]["tfidf"] for r in rows])
    delta = (paired_bootstrap([(predictions["ours"], predictions["gpt_pre"])], params.experiment.seed)
             if {"ours", "gpt_pre"} <= set(predictions) else None)
    write_json(folder / "scores.json", {"scores": scores, "ours_minus_gpt_pre": delta})
    (folder / "tables.md").write_text(tables_markdown(summary, scores, delta, delta_text), encoding="utf-8")
    print((folder / "tables.md").read_text(encoding="utf-8"))


def tables_markdown(summary: dict, scores: dict, delta: dict | None, delta_text) -> str:
    ev = summary["stages"].get("train_evaluator", {})
    f = lambda x: "–" if x is None else f"{x:.3f}"  # noqa: E731 — a one-line local helper
    lines = [f"Device: {summary['device']}, torch {summary['torch']}; {summary['n_train']} training problems, "
             f"{summary['n_validation']} validation, {summary['n_test']} test (Arithmetic fold {FOLD}).", "",
             "| model | train s | steps | generate s | BLEU-4 | METEOR | ROUGE-L | ACC-eq | ACC-eq (equiv.) "
             "| ACC-eq by GPU evaluator | (equiv.) | novel | Dist-3 |", "|" + "---|" * 13]
    for model, s in scores.items():
        st = summary["stages"][model]
        lines.append(f"| {model} | {st.get('train_s')} | {st.get('steps')} | {st.get('generate_s')} | {f(s['bleu4'])} "
                     f"| {f(s['meteor'])} | {f(s['rouge_l'])} | {f(s['acc_eq'])} | {f(s['acc_eq_equivalent'])} "
                     f"| {f(s['acc_eq_gpu_evaluator'])} | {f(s['acc_eq_equivalent_gpu_evaluator'])} "
                     f"| {f(s['novelty'])} | {f(s['dist3'])} |")
    lines += [] if not ev else [
        "", f"Evaluator trained there: {ev.get('steps')} steps in {ev.get('train_s')} s, best step "
            f"{ev.get('best_step')} (validation parse accuracy {f(ev.get('best_val_score'))}); oracle ACC-eq "
            f"{f(ev.get('oracle_acc_eq'))} exact, {f(ev.get('oracle_acc_eq_equivalent'))} equivalent; chance "
            f"({ev.get('chance_equation')}) {f(ev.get('chance_acc_eq'))} / "
            f"{f(ev.get('chance_acc_eq_equivalent'))}."]
    if delta:
        lines += ["", f"ours − GPT-pre (paired bootstrap, 95% interval, {delta['n']} problems): BLEU-4 "
                      f"{delta_text(delta, 'bleu4')}, ACC-eq {delta_text(delta, 'acc_eq')}, ACC-eq (equivalent) "
                      f"{delta_text(delta, 'acc_eq_equivalent')} (ACC-eq by this machine's evaluator)."]
    sel = scores.get("ours", {}).get("selection")
    if sel:
        lines += ["", f"ours' selector on the test problems: median {sel['words_median']} words, mean "
                      f"{sel['words_mean']:.2f}, none for {sel['none_share']:.1%} of problems; picked words among the "
                      f"problem's nouns {sel['in_nouns']:.1%}, among its TF-IDF top 5 {sel['in_tfidf']:.1%}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="on the GPU machine: train, generate, parse")
    t.add_argument("--out", type=Path, required=True, help="summary, generations and parses land here")
    t.add_argument("--models", type=Path, default=Path("/tmp/mwpgen-gpu-models"), help="trained models (kept there)")
    t.add_argument("--generators", nargs="+", choices=GENERATORS, default=list(GENERATORS))
    t.add_argument("--evaluator-metrics", type=Path, default=None,
                   help="skip the evaluator: ours' co-trained mwp2eq learns up to this evaluator's validation parse "
                        "accuracy (e.g. metrics/train/evaluator/arithmetic/fold0.json); nothing is parsed there")
    t.add_argument("--stop-words", type=Path, default=Path(".gpu/stop_words.json"),
                   help="spaCy's stopword list as JSON, used where spaCy is not installed")
    s = sub.add_parser("score", help="here: score a `train` folder as the evaluate stage does, write the tables")
    s.add_argument("folder", type=Path)
    s.add_argument("--evaluator", type=Path, default=Path("models") / "evaluator" / DATASET / f"fold{FOLD}",
                   help="this machine's evaluator (the default run's)")
    for p in (t, s):
        p.add_argument("--params", type=Path, default=Path("params.yaml"))
        p.add_argument("--data", type=Path, default=Path("data"), help="holds processed/, splits/, keywords/")
    args = ap.parse_args()
    if args.command == "train":
        _stop_words_fallback(args.stop_words)
        train(args)
    else:
        score(args)


if __name__ == "__main__":
    main()
