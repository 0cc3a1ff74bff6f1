"""Digests of small, complete trainings of every trainer: run before and after a change to the training code, the
same digests say the change kept the weights, the validation records and the checkpoint choices bit for bit.

    bash scripts/run.sh python scripts/training_digest.py | grep ' weights ' > before.txt   # ... change the code ...
    bash scripts/run.sh python scripts/training_digest.py | grep ' weights ' | diff before.txt -

Each line: a training (causal LM, seq2seq RNN and transformer, ours with the selector and with keywords, tuning by
RFT and DPO), the
sha256 of its final weights, and of what it reports (steps, best step, validation losses). A tiny random Llama and
a handful of problems: about a minute on a 2-core CPU; with validation, early stopping and every phase, so the
loop's bookkeeping is exercised, not only its steps.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: tests.helpers.tiny_model, the tests' tiny random Llama

from mwpgen.config.schema import OursTrainParams, Seq2SeqTrainParams  # noqa: E402 — after sys.path gets the checkout
from mwpgen.lm.loading import load_model_and_tokenizer  # noqa: E402 — after sys.path gets the checkout
from mwpgen.lm.prompts import generator_example, mwp2eq_examples  # noqa: E402 — after sys.path gets the checkout
from mwpgen.lm.training import train_causal_lm  # noqa: E402 — after sys.path gets the checkout
from mwpgen.ours.inputs import JointExample  # noqa: E402 — after sys.path gets the checkout
from mwpgen.ours.joint_step import JointModels  # noqa: E402 — after sys.path gets the checkout
from mwpgen.ours.selector import ContextSelector  # noqa: E402 — after sys.path gets the checkout
from mwpgen.ours.training import train_joint  # noqa: E402 — after sys.path gets the checkout
from mwpgen.seq2seq.baseline import train_baseline  # noqa: E402 — after sys.path gets the checkout
from tests.helpers.tiny_model import tiny_model_dir  # noqa: E402 — after sys.path gets the checkout

STORIES = [
    (
        "x = num1 - num2",
        "Joan found num1 shells on the beach . She gave num2 away . How many are left ?",
        "shells beach",
    ),
    ("x = num1 * num2", "Tom has num1 boxes with num2 candies each . How many candies ?", "boxes candies"),
    ("x = num1 + num2", "A jar holds num1 marbles . Sam adds num2 marbles . How many now ?", "jar marbles"),
    ("x = num1 / num2", "Ann shares num1 apples among num2 friends . How many each ?", "apples friends"),
    ("x = num1 - num2", "A bus had num1 people . num2 got off . How many are on the bus ?", "bus people"),
    ("x = num1 + num2 + num3", "Kim read num1 pages , then num2 , then num3 . How many pages ?", "pages"),
    (
        "x = ( num1 + num2 ) * num3",
        "Each of num3 bags has num1 red and num2 blue beads . How many beads ?",
        "bags beads",
    ),
    ("x = num1 * num2 - num3", "A box has num1 rows of num2 eggs . num3 broke . How many are whole ?", "box eggs"),
]
RECORDS = [{"id": str(i), "equation": e, "text": t} for i, (e, t, _) in enumerate(STORIES)]
KEYWORDS = {str(i): k.split() for i, (_, _, k) in enumerate(STORIES)}
TRAIN, VALIDATION = RECORDS[:6], RECORDS[6:]


def digest(obj) -> str:
    if isinstance(obj, torch.nn.Module):
        h = hashlib.sha256()
        for k, v in sorted(obj.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().float().cpu().numpy().tobytes())
        return h.hexdigest()[:16]
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def causal_lm(model_dir: Path) -> None:
    for by_score in (False, True):
        model, tok = load_model_and_tokenizer(str(model_dir), Path("unused"))
        examples = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in TRAIN]
        validation = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in VALIDATION]
        score = (lambda m, t: -float(sum(p.abs().sum() for p in m.parameters())) % 1.0) if by_score else None
        out = train_causal_lm(model, tok, examples, epochs=6, batch_size=2, lr=1e-2, seed=5, max_length=64,
                              validation=validation, eval_every=2, patience=3, val_score=score, log_every=3,
                              max_steps=0, grad_accum=1, save_every=10)
        report = {k: out[k] for k in ("steps", "best_step", "best_val_loss", "stopped_early", "validations")}
        report["losses"] = [h["train_loss"] for h in out["history"]]
        print(f"causal_lm{'-score' if by_score else ''} weights {digest(model)} report {digest(report)} "
              f"steps {out['steps']} best {out['best_step']}")
    model, tok = load_model_and_tokenizer(str(model_dir), Path("unused"))
    out = train_causal_lm(model, tok, mwp2eq_examples(TRAIN), epochs=2, batch_size=3, lr=1e-2, seed=1, max_length=64,
                          grad_accum=2, max_steps=0, eval_every=0, patience=0, save_every=10)
    losses = [h["train_loss"] for h in out["history"]]
    print(f"causal_lm-accum weights {digest(model)} report {digest(losses)} steps {out['steps']}")


def seq2seq(work: Path) -> None:
    cfg = Seq2SeqTrainParams(steps=40, emb_dim=16, rnn_hidden=16, rnn_layers=1, rnn_batch_size=3, tf_d_model=16,
                             tf_heads=2, tf_layers=1, tf_ff=32, tf_batch_tokens=64, tf_warmup_steps=10,
                             eval_every=4, patience=3, max_len=20)
    for name in ("seq2seq_rnn", "seq2seq_tf"):
        out = train_baseline(cfg, name, "arithmetic", TRAIN, KEYWORDS, work / name, keyword_dropout=0.3, seed=3,
                             device="cpu", glove_cache_dir=work / "glove", log_every=5, validation_records=VALIDATION)
        weights = hashlib.sha256((work / name / "model.safetensors").read_bytes()).hexdigest()[:16]
        t = out["train"]
        report = {k: t.get(k) for k in ("steps", "epochs", "best_step", "best_val_loss", "stopped_early", "validations",
                                        "final_train_loss")}
        print(f"{name} weights {weights} report {digest(report)} steps {t.get('steps')} best {t.get('best_step')}")


def ours(model_dir: Path) -> None:
    examples = [JointExample(r["equation"], r["text"], tuple(KEYWORDS[r["id"]])) for r in TRAIN]
    validation = [JointExample(r["equation"], r["text"], tuple(KEYWORDS[r["id"]])) for r in VALIDATION]
    for context, patience in (("selector", 2), ("noun", 1)):
        cfg = OursTrainParams(phase1={"epochs": 3}, phase2={"epochs": 2}, batch_size=2, lr=1e-2, eval_every=2,
                              patience=patience, context=context, max_problem_tokens=40, max_length=64, save_every=1000)
        gen, tok = load_model_and_tokenizer(str(model_dir), Path("unused"), seed=0)
        mwp2eq, _ = load_model_and_tokenizer(str(model_dir), Path("unused"), seed=1)
        torch.manual_seed(3)
        selector = ContextSelector.from_model(gen, cfg.selector, cfg.rho) if context == "selector" else None
        models = JointModels(gen, mwp2eq, tok, selector)
        logs: list[dict] = []
        out = train_joint(models, examples, cfg, seed=11, log_every=2, validation=validation, dropout=0.3,
                          on_log=lambda r, logs=logs: logs.append({k: v for k, v in r.items() if k != "step_s"}))
        weights = "-".join(digest(m) for m in (gen, mwp2eq, selector) if m is not None)
        history = [{k: v for k, v in h.items() if k != "step_s"} for h in out["history"]]
        report = {
            "val": out["validations"],
            "best_steps": out["best_steps"],
            "steps_run": out["steps_run"],
            "h": history,
            "log": logs,
        }
        print(f"ours-{context} weights {weights} report {digest(report)} steps_run {out['steps_run']} "
              f"best {out['best_steps']}")


def tuning(model_dir: Path) -> None:
    """RFT and DPO on a generator (the tiny model): a few seeded steps each."""
    from mwpgen import tuning as tune

    readings = [{"id": str(i), "equation": e, "context": k, "generated": t, "label": int(i % 3 != 0)}
                for i, (e, t, k) in enumerate(STORIES)]
    readings.append({**readings[0], "generated": STORIES[4][1], "label": 1})  # a right one beside a wrong one
    training = [JointExample(r["equation"], r["text"], tuple(KEYWORDS[r["id"]])) for r in TRAIN]
    for method in ("rft", "dpo"):
        data = (tune.rft_examples(readings, training, mix=1.0, seed=1) if method == "rft"
                else tune.preference_pairs(readings, per_group=4, seed=1))
        model, tok = load_model_and_tokenizer(str(model_dir), Path("unused"), seed=0)
        out = tune.tune_generator(model, tok, method, data, epochs=3, max_steps=7, batch_size=2, lr=1e-2, beta=0.1,
                                  seed=4, width=4, max_problem_tokens=40, log_every=2, save_every=100)
        history = [{k: v for k, v in h.items() if k != "step_s"} for h in out["history"]]
        print(f"tune-{method} weights {digest(model)} report {digest(history)} steps {out['steps']}")


def main() -> None:
    torch.set_num_threads(1)  # the same float sums whatever else runs
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]).prompt + " " + r["text"]
                  for r in RECORDS] + [e.prompt + " " + e.target for e in mwp2eq_examples(RECORDS)]
        model_dir = tiny_model_dir(tmp / "tiny", corpus)
        causal_lm(model_dir)
        seq2seq(tmp)
        ours(model_dir)
        tuning(model_dir)


if __name__ == "__main__":
    main()
