"""The causal-LM trainer's validation, early stopping, checkpoint choice and resume, its precision choice, and the
validation slice of a fold; on a tiny random Llama (fast, offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen import device as device_choice
from mwpgen.data.folds import load_fold
from mwpgen.data.splits import normalise_text
from mwpgen.io import write_json, write_jsonl
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import LMExample, generator_epochs, generator_example, mwp2eq_examples
from mwpgen.lm.training import train_causal_lm, validation_batches, validation_loss
from mwpgen.resume import STATE_FILE, ResumeMismatch
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    {
        "id": "1",
        "text": "Joan found num1 shells . She gave num2 away . How many are left ?",
        "equation": "x = ( num1 - num2 )",
    },
    {
        "id": "2",
        "text": "Tom has num1 boxes with num2 candies each . How many candies ?",
        "equation": "x = ( num1 * num2 )",
    },
    {"id": "3", "text": "A jar holds num1 marbles . Sam adds num2 . How many now ?", "equation": "x = ( num1 + num2 )"},
    {"id": "4", "text": "num1 dollars are shared by num2 kids . How much each ?", "equation": "x = ( num1 / num2 )"},
    {
        "id": "5",
        "text": "A bus had num1 people . num2 got off . How many are on the bus ?",
        "equation": "x = ( num1 - num2 )",
    },
    {
        "id": "6",
        "text": "Ann picks num1 apples a day for num2 days . How many apples ?",
        "equation": "x = ( num1 * num2 )",
    },
    {"id": "7", "text": "Bob read num1 pages and then num2 more . How many pages ?", "equation": "x = ( num1 + num2 )"},
]
KEYWORDS = {"1": ["Joan", "shells"], "2": ["Tom", "boxes", "candies"], "3": ["jar", "marbles"], "4": ["dollars"],
            "5": ["bus", "people"], "6": ["Ann", "apples", "days"], "7": ["Bob", "pages"]}
VALIDATION = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in RECORDS[5:]]
TRAIN = generator_epochs(RECORDS[:5], KEYWORDS, p=0.3, seed=5)  # fresh keyword dropout per epoch
# 5 examples, batch 2: 3 steps per epoch, 4 epochs = 12 steps.
SETTINGS = dict(epochs=4, batch_size=2, lr=1e-2, max_length=64, seed=3, device="cpu", log_every=2, eval_every=2,
                save_every=2, validation=VALIDATION, max_steps=0, grad_accum=1, patience=0)
NO_VALIDATION = dict(max_steps=0, grad_accum=1, eval_every=0, patience=0, save_every=10)  # what the tests leave out


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    corpus = [e.prompt + " " + e.target for e in TRAIN(0) + TRAIN(1) + VALIDATION + mwp2eq_examples(RECORDS)]
    corpus.append("nonsense")
    return tiny_model_dir(tmp_path_factory.mktemp("tiny") / "model", corpus)


def fresh(tiny_dir, dropout: float = 0.0):
    """The tiny model; with attention dropout its training draws from the torch RNG, which a resume must restore."""
    model, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"))
    for module in model.modules():
        if hasattr(module, "attention_dropout"):
            module.attention_dropout = dropout
    return model, tok


class Killed(Exception):
    pass


def train_losses(result: dict) -> list[float]:
    return [h["train_loss"] for h in result["history"]]


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


CASES = {  # name: (mixed_precision, extra settings, kill after step, steps run (None: whenever it stops), early stop)
    "fp32": (False, {}, 9, 12, False),  # the state (step 8) holds the best weights (step 6) beside the current ones
    "autocast-patience": (True, {"patience": 2}, 7, None, True),  # best = the state's step; stops after the resume
    "fp32-no-validation": (False, {"validation": None}, 7, 12, False),  # final weights = the last step's
}


@pytest.mark.parametrize("case", CASES)
def test_killed_run_resumes_bit_for_bit(tiny_dir, tmp_path, case):
    """Kill after step k (last state at the even step before): the rerun replays the lost step and ends with the
    same weights, losses, validation curve and log records as a run never killed (attention dropout on: the
    RNG state is part of the resume)."""
    mixed_precision, extra, kill_at, steps, early = CASES[case]
    settings = {**SETTINGS, **extra, "mixed_precision": mixed_precision}
    model, tok = fresh(tiny_dir, dropout=0.2)
    ref = train_causal_lm(model, tok, TRAIN, **settings)
    ref_weights = weights(model)
    steps = steps or ref["steps"]
    assert (ref["steps"], ref["stopped_early"]) == (steps, early) and kill_at < steps <= 12
    if settings["validation"]:
        assert [r["step"] for r in ref["validations"]] == [s for s in (0, 2, 3, 4, 6, 8, 9, 10, 12) if s <= steps]
        assert ref["best_step"] < steps  # the returned weights are an earlier step's, restored from the state
    assert [r["step"] for r in ref["log"]][:3] == [2, 4, 6]

    state = tmp_path / "resume"

    def kill(step):
        if step == kill_at:
            raise Killed

    model, tok = fresh(tiny_dir, dropout=0.2)
    with pytest.raises(Killed):
        train_causal_lm(model, tok, TRAIN, resume_dir=state, on_step=kill, **settings)
    saved = torch.load(state / STATE_FILE, map_location="cpu", weights_only=True)  # plain tensors and containers
    saved_step = kill_at - kill_at % 2
    assert saved["trainer"]["step"] == saved_step and len(saved["trainer"]["history"]) == saved_step
    best = saved["stopping"]
    assert best["best_is_current"] == (best["best_step"] == saved_step)
    assert case != "fp32" or not best["best_is_current"]  # that case covers best weights kept beside the current
    assert (best["weights"] is not None) == (settings["validation"] is not None and not best["best_is_current"])

    model, tok = fresh(tiny_dir, dropout=0.2)
    out = tmp_path / "final"
    resumed = train_causal_lm(model, tok, TRAIN, resume_dir=state, checkpoint_dir=out, **settings)
    assert resumed["resumed_from"] == saved_step
    assert train_losses(resumed) == train_losses(ref)  # bit-identical floats
    assert resumed["validations"] == ref["validations"]
    assert [(r["step"], r["train_loss"]) for r in resumed["log"]] == [(r["step"], r["train_loss"]) for r in ref["log"]]
    assert (resumed["best_step"], resumed["best_val_loss"]) == (ref["best_step"], ref["best_val_loss"])
    assert (resumed["steps"], resumed["stopped_early"], resumed["tokens"]) == (steps, early, ref["tokens"])
    got = weights(model)
    assert all(torch.equal(got[k], ref_weights[k]) for k in ref_weights)
    assert not (state / STATE_FILE).exists() and not state.exists()  # deleted once the final model is saved
    assert (out / "model.safetensors").is_file()


def test_foreign_state_is_refused(tiny_dir, tmp_path):
    state = tmp_path / "resume"

    def kill(step):
        if step == 3:
            raise Killed

    model, tok = fresh(tiny_dir)
    with pytest.raises(Killed):
        train_causal_lm(model, tok, TRAIN, mixed_precision=False, resume_dir=state, on_step=kill, **SETTINGS)
    model, tok = fresh(tiny_dir)
    with pytest.raises(ResumeMismatch, match="different settings"):
        train_causal_lm(model, tok, TRAIN, mixed_precision=False, resume_dir=state, **{**SETTINGS, "lr": 2e-2})
    model, tok = fresh(tiny_dir)
    with pytest.raises(ResumeMismatch):  # other validation data
        train_causal_lm(model, tok, TRAIN, mixed_precision=False, resume_dir=state,
                        **{**SETTINGS, "validation": VALIDATION[:1]})
    assert (state / STATE_FILE).exists()  # refused, not overwritten


def test_early_stopping_keeps_the_best_weights(tiny_dir, tmp_path):
    """Validation targets that contradict the training targets: the validation loss soon rises, the run stops
    after `patience` evaluations without improvement, and the returned and saved model is the best one."""
    train = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in RECORDS]
    contrary = [LMExample(e.prompt, "nonsense nonsense nonsense") for e in train[:3]]
    model, tok = fresh(tiny_dir)
    out = tmp_path / "best"
    result = train_causal_lm(model, tok, train, epochs=30, batch_size=2, lr=3e-2, max_length=64, seed=0,
                             mixed_precision=False, validation=contrary, eval_every=2, patience=3,
                             checkpoint_dir=out, resume_dir=tmp_path / "resume", max_steps=0, grad_accum=1,
                             save_every=10)
    assert result["stopped_early"] and result["steps"] < 30 * 4
    vals = [r["val_loss"] for r in result["validations"]]
    assert result["best_val_loss"] == min(vals) and vals[-3:] and min(vals[-3:]) > result["best_val_loss"]
    last = result["validations"][-1]["step"]
    assert last == result["steps"] == result["log"][-1]["step"]  # the last window is logged
    batches = validation_batches(tok, contrary, 2, 64)
    assert validation_loss(model, batches) == result["best_val_loss"]  # the model in hand is the best one
    saved, _ = load_model_and_tokenizer(str(out), Path("unused"))
    assert validation_loss(saved, batches) == result["best_val_loss"]
    assert not (tmp_path / "resume").exists()


def test_a_validation_score_chooses_the_checkpoint(tiny_dir, tmp_path):
    """With `val_score`, the best score (not the lowest loss) chooses the weights and drives the patience; the
    evaluator's real score, its exact parse accuracy on the validation slice, runs on the tiny model."""
    scripted = iter([0.1, 0.2, 0.6, 0.3, 0.5, 0.2, 0.9])  # the third evaluation is the best
    model, tok = fresh(tiny_dir)
    result = train_causal_lm(model, tok, TRAIN, **{**SETTINGS, "epochs": 10, "patience": 3}, mixed_precision=False,
                             val_score=lambda m, t: next(scripted))
    scores = [r["val_score"] for r in result["validations"]]
    assert scores == [0.1, 0.2, 0.6, 0.3, 0.5, 0.2] and result["stopped_early"]
    best = result["validations"][2]
    assert result["best_step"] == best["step"] < result["steps"] and result["best_val_score"] == 0.6
    assert result["best_val_loss"] == best["val_loss"]
    assert validation_loss(model, validation_batches(tok, VALIDATION, 2, 64)) == best["val_loss"]

    from flows.train_evaluator import validation_parse_accuracy
    model.train()  # as the trainer calls it
    accuracy = validation_parse_accuracy(RECORDS[5:], batch_size=2)(model, tok)
    assert 0.0 <= accuracy <= 1.0 and model.training  # decoding restores train mode


def test_without_validation_trains_to_the_cap(tiny_dir):
    model, tok = fresh(tiny_dir)
    result = train_causal_lm(model, tok, TRAIN, epochs=2, batch_size=2, lr=1e-2, max_length=64,
                             mixed_precision=False, **{**NO_VALIDATION, "max_steps": 5})
    assert result["steps"] == 5 and result["validations"] == [] and result["best_step"] is None
    assert result["best_val_loss"] is None and not result["stopped_early"] and result["precision"] == "fp32"


def test_autocast_dtype_on_cpu(monkeypatch):
    assert device_choice.autocast_dtype("cpu", False) is None
    monkeypatch.setattr(device_choice, "cpu_supports_bf16", lambda: True)
    assert device_choice.autocast_dtype("cpu", True) == torch.bfloat16
    monkeypatch.setattr(device_choice, "cpu_supports_bf16", lambda: False)
    assert device_choice.autocast_dtype("cpu", True) is None
    assert not device_choice.needs_grad_scaler(torch.bfloat16) and device_choice.needs_grad_scaler(torch.float16)


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    """AVX512-BF16 or AMX-BF16 in any processor's flags line means native bf16; AVX2 alone or no cpuinfo, fp32."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n\nprocessor\t: 1\n")
    assert device_choice.cpu_supports_bf16(cpuinfo) == torch.backends.mkldnn.is_available()
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 amx_bf16 amx_tile\n")
    assert device_choice.cpu_supports_bf16(cpuinfo) == torch.backends.mkldnn.is_available()
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n")
    assert not device_choice.cpu_supports_bf16(cpuinfo)
    assert not device_choice.cpu_supports_bf16(tmp_path / "absent")


def test_a_results_machine_kind_is_read_from_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512_bf16\n\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC 9R14\n")
    assert device_choice.cpu_kind(cpuinfo) == {"cpu": "AMD EPYC 9R14", "kind": "AVX512-BF16"}
    cpuinfo.write_text("model name\t: Intel Xeon\nflags\t\t: fpu sse2 avx2 avx512f\n")
    assert device_choice.cpu_kind(cpuinfo) == {"cpu": "Intel Xeon", "kind": "AVX2-only"}
    assert device_choice.cpu_kind(tmp_path / "absent") == {"cpu": "unknown", "kind": "other"}


@pytest.fixture()
def data_dir(tmp_path) -> Path:
    records = [{"id": str(i), "text": f"problem {i % 40} about things", "equation": "x = num1"} for i in range(60)]
    write_jsonl(tmp_path / "processed" / "toy.jsonl", records)  # ids i and i + 40 share a text
    write_json(tmp_path / "splits" / "toy.json", {"folds": [[str(i) for i in range(k, 60, 3)] for k in range(3)]})
    return tmp_path


def test_validation_slice_is_seeded_disjoint_and_shared(data_dir):
    base = load_fold(data_dir, "toy", 0, 0, 0, seed=1)
    assert base.validation == []
    a = load_fold(data_dir, "toy", 0, 10, 0, seed=1, validation_size=8)
    b = load_fold(data_dir, "toy", 0, 0, 5, seed=1, validation_size=8)
    assert len(a.validation) == 8 and a.validation == b.validation  # the same whatever max_train / max_test
    assert a.validation != load_fold(data_dir, "toy", 0, 0, 0, seed=2, validation_size=8).validation
    val_texts = {normalise_text(r["text"]) for r in a.validation}
    assert len(val_texts) == 8
    test_ids = {r["id"] for r in base.test}
    assert not test_ids & {r["id"] for r in a.validation}  # never from the test fold
    for fold in (a, b):  # no training problem shares a text with the validation slice, before or after subsampling
        assert not val_texts & {normalise_text(r["text"]) for r in fold.train}
    assert len(a.train) == 10 and b.n_train_full == len(b.train) <= base.n_train_full - 8
    assert b.test == load_fold(data_dir, "toy", 0, 0, 5, seed=1).test  # the test subsample does not move
    with pytest.raises(ValueError, match="validation_size"):
        load_fold(data_dir, "toy", 0, validation_size=len(base.train))


def test_shipped_params_enable_validation():
    from mwpgen.config.schema import load_params

    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    assert params.experiment.validation_size > 0
    for cfg in (params.train.generator, params.train.evaluator):
        assert cfg.eval_every >= 0 and cfg.patience >= 0 and cfg.save_every >= 1


def test_bench_precision_smoke(tmp_path, monkeypatch):
    """benchmarks/bench_precision.py on the tiny model: both arms timed, both curves trained, the agreement reported."""
    import json

    from benchmarks import bench_precision as bench
    out = tmp_path / "precision.json"
    monkeypatch.setattr("sys.argv", ["bench_precision.py", "--model", "tiny", "--steps", "1", "--seq", "16",
                                     "--matmul-n", "128", "--curve-steps", "3", "--curve-val", "4", "--out", str(out)])
    bench.main()
    report = json.loads(out.read_text())
    assert set(report["arms"]) == {"fp32", "bf16"} and report["arms"]["bf16"]["tokens_per_s"] > 0
    curves = report["curves"]
    assert curves["steps"] == 3 and len(curves["train_loss"]["bf16"]) == 3
    assert curves["max_abs_diff_train"] >= curves["first_step_abs_diff"] >= 0
