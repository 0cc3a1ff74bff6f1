"""The resumable training loop of "ours" and inference from a saved bundle, on a tiny Llama."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import generator_example, mwp2eq_example
from mwpgen.ours.ablation import VARIANTS, check_variants, variant_of, variant_params
from mwpgen.ours.bundle import generate_with_context, load_bundle, save_bundle
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.joint_step import JointModels
from mwpgen.ours.selector import ContextSelector
from mwpgen.ours.training import phase_steps, train_joint
from mwpgen.registry import ablation_model
from mwpgen.resume import STATE_FILE, ResumeMismatch
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    ("x = ( num1 - num2 )", "Joan found num1 shells on the beach . She gave num2 away . How many are left ?",
     ("Joan", "beach")),
    ("x = ( num1 * num2 )", "Tom has num1 boxes with num2 candies each . How many candies ?", ("boxes",)),
    ("x = ( num1 + num2 )", "A jar holds num1 marbles . Sam adds num2 marbles . How many now ?", ("jar",)),
    ("x = ( num1 / num2 )", "Ann shares num1 apples among num2 friends . How many each ?", ("apples", "friends")),
    ("x = ( num1 - num2 )", "A bus had num1 people . num2 got off . How many are on the bus ?", ("bus",)),
]
EXAMPLES = [JointExample(e, p, k) for e, p, k in RECORDS]


def settings(phase1: int = 2, phase2: int = 1, max1: int = 0, max2: int = 0, **kw) -> OursTrainParams:
    """`train.ours` for the tiny runs: no validation schedule unless asked, one learning rate for all models."""
    return OursTrainParams(phase1={"epochs": phase1, "max_steps": max1}, phase2={"epochs": phase2, "max_steps": max2},
                           **{"batch_size": 2, "lr": 1e-2, "selector_lr": 0.0, "save_every": 2, "eval_every": 0,
                              "patience": 0, "rho": 0.2, **kw})


SETTINGS = settings()


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    corpus = [generator_example(e, k, p).prompt + " " + p for e, p, k in RECORDS]
    corpus += [mwp2eq_example(p, e).prompt + " " + e for e, p, _ in RECORDS]
    return tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", corpus)


def fresh_models(path, selector: bool = True) -> JointModels:
    gen, tok = load_model_and_tokenizer(str(path), Path("unused"))
    mwp2eq, _ = load_model_and_tokenizer(str(path), Path("unused"), seed=1)
    torch.manual_seed(3)  # the selector's w, b initialisation
    return JointModels(gen, mwp2eq, tok, ContextSelector.from_model(gen) if selector else None)


def params_of(models: JointModels) -> dict[str, torch.Tensor]:
    out = {f"g.{k}": v.detach().clone() for k, v in models.generator.state_dict().items()}
    out |= {f"p.{k}": v.detach().clone() for k, v in models.mwp2eq.state_dict().items()}
    out |= {f"s.{k}": v.detach().clone() for k, v in models.selector.state_dict().items()}
    return out


class Killed(Exception):
    pass


def test_schedule_counts_steps_per_phase():
    assert phase_steps(SETTINGS, 5) == (6, 3)  # 3 batches per epoch
    assert phase_steps(settings(phase1=3, max1=4, max2=1), 5) == (4, 1)
    assert phase_steps(settings(phase2=0), 5) == (6, 0)  # a skipped phase


def test_killed_run_resumes_to_the_uninterrupted_result(tiny_path, tmp_path):
    """Kill after step 5 (last checkpoint at step 4): the rerun replays step 5 and ends bit-for-bit equal."""
    reference = fresh_models(tiny_path)
    ref = train_joint(reference, EXAMPLES, SETTINGS, seed=7, log_every=2, dropout=0.0)
    assert ref["scheduled_steps"] == (6, 3) and [h["phase"] for h in ref["history"]] == [1] * 6 + [2] * 3

    state = tmp_path / "state"

    def kill(step):
        if step == 5:
            raise Killed

    with pytest.raises(Killed):
        train_joint(fresh_models(tiny_path), EXAMPLES, SETTINGS, seed=7, log_every=2, state_dir=state,
                    on_step=kill, dropout=0.0)
    assert (state / STATE_FILE).exists()
    resumed_models = fresh_models(tiny_path)
    resumed = train_joint(resumed_models, EXAMPLES, SETTINGS, seed=7, log_every=2, state_dir=state, dropout=0.0)
    assert resumed["resumed_from"] == 4
    expected, got = params_of(reference), params_of(resumed_models)
    assert expected.keys() == got.keys()
    for k in expected:
        assert torch.equal(expected[k], got[k]), k
    def strip(hs):
        return [{k: v for k, v in h.items() if k != "step_s"} for h in hs]
    assert strip(resumed["history"]) == strip(ref["history"])


def test_a_state_from_other_settings_is_refused(tiny_path, tmp_path):
    state = tmp_path / "state"
    short = settings(phase1=1, max1=2, max2=1, save_every=1)

    def kill(step):
        raise Killed

    with pytest.raises(Killed):
        train_joint(
            fresh_models(tiny_path), EXAMPLES, short, seed=7, log_every=2, state_dir=state, on_step=kill, dropout=0.0
        )
    with pytest.raises(ResumeMismatch, match="different settings"):  # another keyword dropout
        train_joint(fresh_models(tiny_path), EXAMPLES, short, seed=7, log_every=2, state_dir=state, dropout=0.3)
    with pytest.raises(ResumeMismatch, match="different settings"):
        train_joint(
            fresh_models(tiny_path),
            EXAMPLES,
            short.model_copy(update={"alpha": 2.0}),
            seed=7,
            log_every=2,
            dropout=0.0,
            state_dir=state,
        )


def test_selector_learns_in_phase1_and_is_frozen_in_phase2(tiny_path):
    models = fresh_models(tiny_path)
    before = models.selector.proj.weight.detach().clone()
    snapshots = {}
    train_joint(models, EXAMPLES, settings(max1=2, max2=2), seed=1, log_every=2, dropout=0.0,
                on_step=lambda g: snapshots.setdefault(g, models.selector.proj.weight.detach().clone()))
    assert not torch.equal(before, snapshots[2])  # phase 1 trains Psi
    assert torch.equal(snapshots[2], snapshots[4])  # phase 2 does not


def test_serving_writes_what_the_generate_stage_writes(tiny_path, tmp_path):
    """One input for a keyword context: `mwpgen generate` (mwpgen.generate.service) and the generate stage
    (generate_with_context) decode the same greedy problem from the same equation and keywords."""
    from mwpgen.generate.request import Request
    from mwpgen.generate.service import Service

    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    save_bundle(tmp_path / "b", gen, tok, None, {"context": "noun", "threshold": 0.5, "max_problem_tokens": 96,
                                                 "context_tokens": 8})
    gen2, tok2, selector, settings_ = load_bundle(tmp_path / "b")
    assert selector is None and settings_["context"] == "noun"
    texts, contexts = generate_with_context(gen2, tok2, None, EXAMPLES, width=8, max_new_tokens=12, batch_size=2)
    assert contexts == [list(e.keywords) for e in EXAMPLES]
    service = Service(gen2, tok2, None, settings_)
    for ex, text in zip(EXAMPLES, texts):
        [served] = service.answer(Request(ex.equation, ex.keywords, decoding="greedy", max_new_tokens=12))
        assert served.masked_text == text


def test_selector_bundle_round_trip_and_threshold(tiny_path, tmp_path):
    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    selector = ContextSelector.from_model(gen)
    with torch.no_grad():
        selector.proj.bias.fill_(5.0)  # q ~ 1: every candidate word selected
    save_bundle(tmp_path / "b", gen, tok, selector, {"context": "selector", "threshold": 0.5,
                                                      "max_problem_tokens": 96, "context_tokens": 24})
    gen2, tok2, sel2, _ = load_bundle(tmp_path / "b")
    assert torch.equal(sel2.proj.bias, selector.proj.bias) and torch.equal(sel2.embeddings, selector.embeddings)
    _, contexts = generate_with_context(gen2, tok2, sel2, EXAMPLES[:2], width=24, max_new_tokens=4)
    assert contexts[0] == ["Joan", "found", "shells", "beach", "gave", "away", "left"]
    with torch.no_grad():
        sel2.proj.bias.fill_(-5.0)
    _, none = generate_with_context(gen2, tok2, sel2, EXAMPLES[:2], width=24, max_new_tokens=4)
    assert none == [[], []]


def test_variants_switch_the_documented_settings():
    base = OursTrainParams()
    assert variant_params(base, "full") == base
    v = variant_params(base, "eq_softmax")
    assert (v.context, v.relaxation, v.equation_loss) == ("noun", "softmax", True)
    v = variant_params(base, "no_both")
    assert (v.context, v.context_loss, v.equation_loss) == ("selector", False, False)
    check_variants()  # the registry and the switch table list the same variants
    assert all(variant_of(ablation_model(name)) == name for name in VARIANTS)
    assert variant_of("ours") == "full" and variant_of("gpt") is None
    # GPT-pre trains the "keyword, noun+pronoun" objective: it answers that row unless `noun` itself was trained
    assert variant_of("gpt_pre") == "noun" and variant_of("gpt_pre", trained=["noun"]) is None
    with pytest.raises(ValueError, match="unknown ablation variant"):
        ablation_model("bogus")


def test_without_l_eq_no_mwp2eq_is_trained_and_with_it_one_is_required(tiny_path):
    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    models = JointModels(gen, None, tok, None)
    result = train_joint(models, EXAMPLES, settings(max1=2, max2=2, context="noun", equation_loss=False), seed=1,
                         log_every=2, dropout=0.0)
    assert [sorted(h) for h in result["history"]][-1] == ["epoch", "objective", "phase", "step", "step_s", "train_loss"]
    with pytest.raises(ValueError, match="needs the mwp2eq model"):
        train_joint(JointModels(gen, None, tok, None), EXAMPLES, settings(max1=1, max2=1, context="noun"), seed=1,
                    log_every=2, dropout=0.0)


def test_each_component_keeps_its_best_validation_weights_and_only_phase2_stops_early(tiny_path, tmp_path):
    """Phase 1 runs its whole schedule and keeps the selector of lowest validation loss without resetting the
    generator; phase 2 starts from the generator phase 1 left (its first candidate), keeps the best generator and
    may stop early; the co-trained mwp2eq's parse accuracy is measured as phase 2 starts."""
    from mwpgen.ours.selection_stats import context_lm_loss

    schedule = settings(phase1=4, phase2=6, eval_every=1, patience=2)  # lr 1e-2: overfits, val loss turns
    models = fresh_models(tiny_path)
    selector_at, generator_at = {}, {}

    def snapshot(step):
        selector_at[step] = models.selector.proj.weight.detach().clone()
        generator_at[step] = models.generator.model.layers[0].mlp.up_proj.weight.detach().clone()

    # seed 1: a batch order whose tiny run turns its selector's validation loss before phase 1 ends (the scenario)
    out = train_joint(models, EXAMPLES[:3], schedule, seed=1, log_every=2, validation=EXAMPLES[3:],
                      state_dir=tmp_path / "s", dropout=0.0, on_step=snapshot)
    s1, s2 = out["scheduled_steps"]
    phase1 = [v for v in out["validations"] if v["phase"] == 1]
    assert out["steps_run"][0] == s1 and [v["step"] for v in phase1] == list(range(1, s1 + 1))  # never stopped
    best_selector = min(phase1, key=lambda v: v["val_loss"])["step"]
    assert out["best_steps"]["selector"] == best_selector < s1
    assert torch.equal(selector_at[s1], selector_at[best_selector])  # the selector went back to its best
    assert not torch.equal(generator_at[s1], generator_at[best_selector])  # the generator did not
    phase2 = [v for v in out["validations"] if v["phase"] == 2]
    assert phase2[0]["step"] == s1  # phase 1's generator is phase 2's first candidate
    best2 = min(phase2, key=lambda v: v["val_loss"])
    assert out["best_steps"]["generator"] == best2["step"]
    assert out["steps_run"][1] < s2 and [span["phase"] for span in out["spans"] if span["stopped_at"]] == [2]
    # the generator that goes on is the best one measured, not the last one
    assert context_lm_loss(models, EXAMPLES[3:], schedule.max_problem_tokens, 0.5,
                           schedule.context_tokens) == pytest.approx(best2["val_loss"], abs=1e-5)
    assert 0.0 <= out["mwp2eq_val_accuracy"] <= 1.0


def test_the_co_trained_mwp2eq_reads_several_batches_per_phase1_step(tiny_path, monkeypatch):
    """mwp2eq_batches_per_step = 3: at each phase-1 step the co-trained mwp2eq learns from the generator's batch and
    from the same index of two fresh orders of the epoch, so one phase-1 epoch gives it three (issue 24); phase 2
    is unchanged. 1 pass reads exactly the generator's batch, as before."""
    import mwpgen.ours.training as training

    def recorded(passes: int) -> tuple[list, list]:
        generator_batches, mwp2eq_batches = [], []
        real_phase1, real_mwp2eq = training.phase1_step, training.mwp2eq_step
        monkeypatch.setattr(training, "phase1_step", lambda models, batch, *a: (
            generator_batches.append([e.example.problem for e in batch]), real_phase1(models, batch, *a))[1])
        monkeypatch.setattr(training, "mwp2eq_step", lambda models, batch, *a: (
            mwp2eq_batches.append([e.example.problem for e in batch]), real_mwp2eq(models, batch, *a))[1])
        train_joint(fresh_models(tiny_path), EXAMPLES, settings(phase1=1, max2=1, mwp2eq_batches_per_step=passes),
                    seed=1, log_every=10, dropout=0.0)
        return generator_batches, mwp2eq_batches

    generator_batches, mwp2eq_batches = recorded(1)
    assert mwp2eq_batches == generator_batches
    generator_batches, mwp2eq_batches = recorded(3)
    steps = phase_steps(settings(phase1=1), len(EXAMPLES))[0]
    assert len(generator_batches) == steps and len(mwp2eq_batches) == 3 * steps
    assert mwp2eq_batches[0::3] == generator_batches  # the first pass: the generator's own batch
    def epoch(i):
        return sorted(map(tuple, (b for batch in mwp2eq_batches[i::3] for b in batch)))
    assert epoch(1) == epoch(2) == epoch(0)  # each pass: every problem once in the epoch
    assert mwp2eq_batches[1::3] != mwp2eq_batches[0::3]  # in its own order


def _scripted_gate(monkeypatch, accuracies: list[float]) -> list:
    """parser_gate with its parse accuracies read from `accuracies` in turn; returns the mwp2eq's weights after
    each of its training batches (one layer, enough to tell them apart)."""
    import mwpgen.ours.parser_gate as gate

    script, after_batch = iter(accuracies), []
    real_step = gate.mwp2eq_step

    def step(models, batch, *a):
        out = real_step(models, batch, *a)
        after_batch.append(models.mwp2eq.model.layers[0].mlp.up_proj.weight.detach().clone())
        return out

    monkeypatch.setattr(gate, "parse_accuracy", lambda *a, **k: next(script))
    monkeypatch.setattr(gate, "mwp2eq_step", step)
    return after_batch


def _gate(tiny_path, target: float, eval_every: int):
    from mwpgen.ours.inputs import encode_joint
    from mwpgen.ours.joint_step import make_optimizers
    from mwpgen.ours.parser_gate import reach_parse_accuracy

    models = fresh_models(tiny_path)
    cfg = settings(eval_every=eval_every)
    encoded = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in EXAMPLES]
    start = models.mwp2eq.model.layers[0].mlp.up_proj.weight.detach().clone()
    optimizers = make_optimizers(models, lr=1e-2, selector_lr=1e-2)
    record = reach_parse_accuracy(models, encoded, ["p"], ["x = num1"], cfg, optimizers, target=target, seed=3)
    return models, start, record


def test_the_co_trained_mwp2eq_learns_on_until_it_reaches_the_evaluator(tiny_path, monkeypatch):
    """Measured every eval_every batches; it stops at the first measurement that reaches the target."""
    after_batch = _scripted_gate(monkeypatch, [0.2, 0.4, 0.6, 0.9])
    models, start, record = _gate(tiny_path, target=0.5, eval_every=1)
    assert record["reached"] and record["batches"] == 2 and record["accuracy"] == 0.6 and record["kept_at"] == 2
    assert [m["accuracy"] for m in record["measurements"]] == [0.2, 0.4, 0.6] and record["start"] == 0.2
    assert len(after_batch) == 2 and not torch.equal(after_batch[-1], start)
    assert torch.equal(models.mwp2eq.model.layers[0].mlp.up_proj.weight, after_batch[-1])


def test_a_parser_that_never_reaches_it_spends_one_epoch_and_keeps_its_best(tiny_path, monkeypatch):
    """5 problems in batches of 2: one epoch is 3 batches; the best measurement (after batch 1) is what goes on."""
    after_batch = _scripted_gate(monkeypatch, [0.3, 0.5, 0.1, 0.4, 0.99])
    models, _, record = _gate(tiny_path, target=0.9, eval_every=1)
    assert not record["reached"] and record["batches"] == 3 and len(after_batch) == 3
    assert record["accuracy"] == 0.5 and record["kept_at"] == 1
    assert torch.equal(models.mwp2eq.model.layers[0].mlp.up_proj.weight, after_batch[0])


def test_a_parser_already_there_is_not_trained(tiny_path, monkeypatch):
    after_batch = _scripted_gate(monkeypatch, [0.7])
    models, start, record = _gate(tiny_path, target=0.7, eval_every=0)
    assert record["reached"] and record["batches"] == 0 and after_batch == []
    assert torch.equal(models.mwp2eq.model.layers[0].mlp.up_proj.weight, start)


def test_the_gate_runs_between_the_phases_and_only_with_l_eq(tiny_path, monkeypatch):
    """train_joint with the evaluator's accuracy: the gate runs once as phase 2 starts, before any phase-2 step, and
    its kept accuracy is the one recorded; without L_eq there is no parser to gate."""
    import mwpgen.ours.training as training

    order = []
    _scripted_gate(monkeypatch, [0.1, 0.8])
    real_phase2, real_gate = training.phase2_step, training.reach_parse_accuracy
    monkeypatch.setattr(training, "phase2_step", lambda *a: (order.append("phase2"), real_phase2(*a))[1])
    monkeypatch.setattr(training, "reach_parse_accuracy", lambda *a, **k: (order.append("gate"),
                                                                           real_gate(*a, **k))[1])
    out = train_joint(fresh_models(tiny_path), EXAMPLES[:3], settings(phase1=1, max2=2, eval_every=1), seed=2,
                      log_every=10, validation=EXAMPLES[3:], dropout=0.0, mwp2eq_target=0.5)
    assert order == ["gate", "phase2", "phase2"]
    assert out["mwp2eq_gate"]["batches"] == 1 and out["mwp2eq_val_accuracy"] == 0.8
    order.clear()
    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    out = train_joint(JointModels(gen, None, tok, ContextSelector.from_model(gen)), EXAMPLES[:3],
                      settings(phase1=1, max2=1, equation_loss=False), seed=2, log_every=10,
                      validation=EXAMPLES[3:], dropout=0.0, mwp2eq_target=0.5)
    assert out["mwp2eq_gate"] is None and "gate" not in order
