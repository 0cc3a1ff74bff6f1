"""Decoding, chosen on the validation slice: would beam search instead of greedy decoding raise the default run's
scores, and at what cost in time?

Two questions, both answered with the committed default run's trained models and nothing retrained:

1. **Generators** (GPT-pre, ours, ...): each writes one problem for every problem of the fold's validation slice
   (carved from the training fold with the seed of params.yaml, never the test fold; the generators never trained
   on it) with greedy and with beam-N decoding, exactly as the `generate` stage does with `generate.decoding`
   (baselines: the heuristic keywords of the problem; ours: its selector's picks). Scored as the `evaluate` stage
   scores: BLEU-4, METEOR, ROUGE-L, and ACC-eq (exact, equivalent) by the fold's independent evaluator.
2. **The evaluator's parse** (mwp2eq, greedy in the `evaluate` stage): its accuracy on the real problems of the
   validation slice and of the test fold (the oracle ACC-eq) with greedy, beam-N, and beam-N keeping the most
   likely of the N beams that is a well-formed equation using only `num` tokens of the problem.

    python -m studies.decoding_choice.choose_decoding --models gpt_pre ours --out studies/decoding_choice

Writes <out>/decoding_choice.json, <out>/decoding_choice.md and <out>/generations_<model>_<decoding>.csv.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

from mwpgen import registry
from mwpgen.config.schema import Params, load_params
from mwpgen.data.equations import EquationError, is_num_token, normalize_equation
from mwpgen.data.folds import load_fold
from mwpgen.device import resolve_device
from mwpgen.evaluation.metrics import TextScorer, acc_eq, score_generations
from mwpgen.io import read_jsonl, write_generations
from mwpgen.lm.decoding import _generation_config, _left_pad, predict_equations
from mwpgen.lm.loading import load_trained
from mwpgen.lm.prompts import encode_prompt, generator_prompt, mwp2eq_prompt
from mwpgen.ours.bundle import bundle_settings
from mwpgen.ours.inputs import JointExample
from mwpgen.paths import FoldPaths
from tasks import generate as tasks_generate

ROOT = Path(__file__).resolve().parents[2]


def generate_with(params: Params, model: str, paths: FoldPaths, records: list[dict], keywords: dict
             ) -> tuple[list[str], list[list[str]]]:
    """One problem per record and the context words it was written from, by the calls flows/generate.py makes (the
    tasks' functions, without Prefect runs)."""
    if registry.spec(model).decoder == "ours":
        context = bundle_settings(paths.model_dir)["context"]
        picked = keywords[context] if context != "selector" else {}
        examples = [JointExample(r["equation"], r["text"], tuple(picked.get(r["id"], ()))) for r in records]
        return tasks_generate.generate_ours.fn(params, paths.model_dir, examples)
    contexts = [list(keywords["baseline"][r["id"]]) for r in records]
    prompts = [generator_prompt(r["equation"], c) for r, c in zip(records, contexts)]
    return tasks_generate.generate_lm.fn(params, paths.model_dir, prompts), contexts


@torch.no_grad()
def parse_beams(model, tokenizer, problems: list[str], num_beams: int, batch_size: int, device: str
                ) -> list[list[str]]:
    """mwp2eq's `num_beams` beams per problem, most likely first (the prompt and cut of decoding.generate_texts)."""
    config = _generation_config(tokenizer, "beam", num_beams, 1.0, 1.0, 48)
    config.num_return_sequences = num_beams
    model.eval()
    encoded = [encode_prompt(tokenizer, mwp2eq_prompt(p)) for p in problems]
    out: list[list[str]] = []
    for start in range(0, len(encoded), batch_size):
        ids, mask = _left_pad(encoded[start:start + batch_size], tokenizer.pad_token_id)
        seqs = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
        texts = tokenizer.batch_decode(seqs[:, ids.shape[1]:], skip_special_tokens=True)
        out += [[" ".join(t.split("\n", 1)[0].split()) for t in texts[i:i + num_beams]]
                for i in range(0, len(texts), num_beams)]
    return out


def num_tokens(symbols: list[str]) -> set[str]:
    return {s for s in symbols if is_num_token(s)}


def first_valid(beams: list[str], problem: str) -> str:
    """The most likely beam that is a well-formed equation whose `num` tokens all occur in the problem (else the
    most likely beam)."""
    present = num_tokens(problem.split())
    for beam in beams:
        try:
            symbols = normalize_equation(beam)
        except EquationError:
            continue
        if num_tokens(symbols) <= present:
            return beam
    return beams[0]


def evaluator_rows(evaluator, tokenizer, splits: dict[str, list[dict]], num_beams: int, batch_size: int,
                   device: str) -> list[dict]:
    rows = []
    for split, records in splits.items():
        problems, references = [r["text"] for r in records], [r["equation"] for r in records]
        start = time.perf_counter()
        greedy = predict_equations(evaluator, tokenizer, problems, batch_size=batch_size, device=device)
        greedy_s = time.perf_counter() - start
        start = time.perf_counter()
        beams = parse_beams(evaluator, tokenizer, problems, num_beams, batch_size, device)
        beam_s = time.perf_counter() - start
        for name, parsed, seconds in (
            ("greedy", greedy, greedy_s),
            (f"beam-{num_beams}", [b[0] for b in beams], beam_s),
            (f"beam-{num_beams}, first valid", [first_valid(b, p) for b, p in zip(beams, problems)], beam_s),
        ):
            rows.append({"split": split, "n": len(records), "parse": name, "acc_eq": acc_eq(parsed, references),
                         "acc_eq_equivalent": acc_eq(parsed, references, equivalent_too=True),
                         "s_per_problem": seconds / len(records)})
            print(f"evaluator {split} {name}: {rows[-1]['acc_eq']:.3f} / {rows[-1]['acc_eq_equivalent']:.3f}",
                  file=sys.stderr, flush=True)
    return rows


def run(args: argparse.Namespace) -> dict:
    params = load_params(args.params)
    exp, g = params.experiment, params.generate
    device = resolve_device(params.train.device)
    fold = load_fold(ROOT / "data", args.dataset, args.fold, 0, 0, exp.seed, exp.validation_size)
    validation = fold.validation[:args.max_problems] if args.max_problems else fold.validation
    test = fold.test[:args.max_problems] if args.max_problems else fold.test
    data_paths = FoldPaths(ROOT, None, args.dataset, args.fold)
    by_kind = {kind: {r["id"]: r[kind] for r in read_jsonl(data_paths.keywords)} for kind in ("noun", "tfidf")}
    keywords = {**by_kind, "baseline": by_kind[params.keywords.baseline_context]}
    evaluator, evaluator_tokenizer = load_trained(data_paths.evaluator.model_dir, device)
    train_texts = [r["text"] for r in fold.train]
    generator_rows = []
    with TextScorer(params.evaluate.meteor_timeout_s, params.evaluate.max_hypothesis_chars) as scorer:
        for model in args.models:
            paths = FoldPaths(ROOT, model, args.dataset, args.fold)
            for decoding in args.decodings:
                decoded_as = params.model_copy(update={"generate": g.model_copy(update={"decoding": decoding})})
                start = time.perf_counter()
                texts, contexts = generate_with(decoded_as, model, paths, validation, keywords)
                seconds = time.perf_counter() - start
                parsed = predict_equations(evaluator, evaluator_tokenizer, texts, batch_size=g.batch_size,
                                           device=device)
                rows = [{"fold": args.fold, "id": r["id"], "equation": r["equation"], "context": " ".join(c),
                         "reference": r["text"], "generated": t} for r, t, c in zip(validation, texts, contexts)]
                scores, _ = score_generations(rows, parsed, train_texts, scorer)
                write_generations(args.out / f"generations_{model}_{decoding}.csv", rows)
                generator_rows.append({"model": model, "decoding": decoding if decoding != "beam"
                                       else f"beam-{g.num_beams}", "n": len(rows),
                                       **{k: scores[k] for k in ("bleu4", "meteor", "rouge_l", "acc_eq",
                                                                 "acc_eq_equivalent")},
                                       "s_per_problem": seconds / len(rows)})
                print(f"{model} {decoding}: BLEU-4 {scores['bleu4']:.3f} ACC-eq {scores['acc_eq']:.3f} "
                      f"({seconds:.0f} s)", file=sys.stderr, flush=True)
    parse_rows = evaluator_rows(evaluator, evaluator_tokenizer, {"validation": validation, "test": test},
                                g.num_beams, g.batch_size, device)
    return {"dataset": args.dataset, "fold": args.fold, "seed": exp.seed, "num_beams": g.num_beams,
            "device": device, "device_name": platform.processor() or device, "torch_threads": torch.get_num_threads(),
            "generators": generator_rows, "evaluator": parse_rows}


def markdown(result: dict) -> str:
    f3 = "{:.3f}".format
    lines = [(f"Decoding on {result['dataset']} fold {result['fold']}, the default run's trained models "
              f"({result['device']}, {result['torch_threads']} threads)."), "",
             "Generators on the validation slice (ACC-eq by the fold's independent evaluator, greedy parse):", "",
             "| model | decoding | n | BLEU-4 | METEOR | ROUGE-L | ACC-eq | ACC-eq equivalent | s / problem |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['decoding']} | {r['n']} | {f3(r['bleu4'])} | {f3(r['meteor'])} | "
              f"{f3(r['rouge_l'])} | {f3(r['acc_eq'])} | {f3(r['acc_eq_equivalent'])} | {r['s_per_problem']:.3f} |"
              for r in result["generators"]]
    lines += ["", "The evaluator's parse of real problems (test = the oracle ACC-eq):", "",
              "| split | n | parse | ACC-eq | ACC-eq equivalent | s / problem |", "|---|---:|---|---:|---:|---:|"]
    lines += [f"| {r['split']} | {r['n']} | {r['parse']} | {f3(r['acc_eq'])} | {f3(r['acc_eq_equivalent'])} | "
              f"{r['s_per_problem']:.3f} |" for r in result["evaluator"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--dataset", default="arithmetic")
    ap.add_argument("--fold", type=int, default=0)
    ap.add_argument("--models", nargs="+", default=["gpt_pre", "ours"], choices=registry.generator_names())
    ap.add_argument("--decodings", nargs="+", default=["greedy", "beam"], choices=["greedy", "beam"])
    ap.add_argument("--max-problems", type=int, default=0, help="first N of each split (0 = all; for a quick try)")
    ap.add_argument("--out", type=Path, default=ROOT / "studies" / "decoding_choice")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = run(args)
    (args.out / "decoding_choice.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "decoding_choice.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result), end="")


if __name__ == "__main__":
    main()
