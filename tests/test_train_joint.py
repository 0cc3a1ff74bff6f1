"""The resumable training loop of "ours" and inference from a saved bundle, on a tiny Llama."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen.ours.ablation import VARIANTS, check_variants, variant_of, variant_params
from mwpgen.registry import ablation_model
from mwpgen.config.schema import OursTrainParams
from mwpgen.lm.decoding import generate_texts
from mwpgen.ours.inputs import JointExample
from mwpgen.ours.steps import JointModels
from mwpgen.lm.loading import load_model_and_tokenizer
from tiny_model import tiny_model_dir
from mwpgen.lm.prompts import generator_example, generator_prompt, mwp2eq_example
from mwpgen.ours.bundle import generate_with_context, load_bundle, save_bundle
from mwpgen.ours.selector import ContextSelector
from mwpgen.ours.training import phase_steps, train_joint
from mwpgen.resume import STATE_FILE, ResumeMismatch

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
    ref = train_joint(reference, EXAMPLES, SETTINGS, seed=7, log_every=2)
    assert ref["steps"] == (6, 3) and [h["phase"] for h in ref["history"]] == [1] * 6 + [2] * 3

    state = tmp_path / "state"

    def kill(step):
        if step == 5:
            raise Killed

    with pytest.raises(Killed):
        train_joint(fresh_models(tiny_path), EXAMPLES, SETTINGS, seed=7, log_every=2, state_dir=state,
                    on_step=kill)
    assert (state / STATE_FILE).exists()
    resumed_models = fresh_models(tiny_path)
    resumed = train_joint(resumed_models, EXAMPLES, SETTINGS, seed=7, log_every=2, state_dir=state)
    assert resumed["resumed_from"] == 4
    expected, got = params_of(reference), params_of(resumed_models)
    assert expected.keys() == got.keys()
    for k in expected:
        assert torch.equal(expected[k], got[k]), k
    strip = lambda hs: [{k: v for k, v in h.items() if k != "step_s"} for h in hs]  # noqa: E731
    assert strip(resumed["history"]) == strip(ref["history"])


def test_a_state_from_other_settings_is_refused(tiny_path, tmp_path):
    state = tmp_path / "state"
    short = settings(phase1=1, max1=2, max2=1, save_every=1)

    def kill(step):
        raise Killed

    with pytest.raises(Killed):
        train_joint(fresh_models(tiny_path), EXAMPLES, short, seed=7, log_every=2, state_dir=state, on_step=kill)
    with pytest.raises(ResumeMismatch, match="different settings"):
        train_joint(fresh_models(tiny_path), EXAMPLES, short.model_copy(update={"alpha": 2.0}), seed=7, log_every=2,
                    state_dir=state)


def test_selector_learns_in_phase1_and_is_frozen_in_phase2(tiny_path):
    models = fresh_models(tiny_path)
    before = models.selector.proj.weight.detach().clone()
    snapshots = {}
    train_joint(models, EXAMPLES, settings(max1=2, max2=2), seed=1, log_every=2,
                on_step=lambda g: snapshots.setdefault(g, models.selector.proj.weight.detach().clone()))
    assert not torch.equal(before, snapshots[2])  # phase 1 trains Psi
    assert torch.equal(snapshots[2], snapshots[4])  # phase 2 does not


def test_keyword_context_generation_equals_the_text_prompt(tiny_path, tmp_path):
    """With heuristic keywords, decoding from prompt embeddings must match decoding from the text prompt."""
    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    save_bundle(tmp_path / "b", gen, tok, None, {"context": "noun", "threshold": 0.5, "max_problem_tokens": 96})
    gen2, tok2, selector, settings = load_bundle(tmp_path / "b")
    assert selector is None and settings["context"] == "noun"
    texts, contexts = generate_with_context(gen2, tok2, None, EXAMPLES, max_new_tokens=12, batch_size=2)
    reference = generate_texts(gen2, tok2, [generator_prompt(e.equation, e.keywords) for e in EXAMPLES],
                               max_new_tokens=12, batch_size=2)
    assert texts == reference
    assert contexts == [list(e.keywords) for e in EXAMPLES]


def test_selector_bundle_round_trip_and_threshold(tiny_path, tmp_path):
    gen, tok = load_model_and_tokenizer(str(tiny_path), Path("unused"))
    selector = ContextSelector.from_model(gen)
    with torch.no_grad():
        selector.proj.bias.fill_(5.0)  # q ~ 1: every candidate word selected
    save_bundle(tmp_path / "b", gen, tok, selector, {"context": "selector", "threshold": 0.5,
                                                      "max_problem_tokens": 96})
    gen2, tok2, sel2, _ = load_bundle(tmp_path / "b")
    assert torch.equal(sel2.proj.bias, selector.proj.bias) and torch.equal(sel2.embeddings, selector.embeddings)
    _, contexts = generate_with_context(gen2, tok2, sel2, EXAMPLES[:2], max_new_tokens=4)
    assert contexts[0] == ["Joan", "found", "shells", "beach", "gave", "away", "left"]
    with torch.no_grad():
        sel2.proj.bias.fill_(-5.0)
    _, none = generate_with_context(gen2, tok2, sel2, EXAMPLES[:2], max_new_tokens=4)
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
                         log_every=2)
    assert [sorted(h) for h in result["history"]][-1] == ["epoch", "lm", "loss", "phase", "step", "step_s"]
    with pytest.raises(ValueError, match="needs the mwp2eq model"):
        train_joint(JointModels(gen, None, tok, None), EXAMPLES, settings(max1=1, max2=1, context="noun"), seed=1,
                    log_every=2)


def test_each_phase_ends_with_its_best_validation_weights_and_can_stop_early(tiny_path, tmp_path):
    from mwpgen.ours.selection import context_lm_loss

    schedule = settings(phase1=6, eval_every=1, patience=2)  # lr 1e-2: overfits, val loss turns
    models = fresh_models(tiny_path)
    out = train_joint(models, EXAMPLES[:3], schedule, seed=7, log_every=2, validation=EXAMPLES[3:],
                      state_dir=tmp_path / "s")
    s1, s2 = out["steps"]
    phase1 = [v for v in out["val"] if v["phase"] == 1]
    assert len(phase1) < s1 and any(h.get("stopped_phase") == 1 for h in out["history"])  # stopped early
    assert out["steps_run"][0] == phase1[-1]["step"] < s1 and out["steps_run"][1] == s2
    assert out["best_steps"][1] == min(phase1, key=lambda v: v["val_loss"])["step"]
    phase2 = [v for v in out["val"] if v["phase"] == 2]
    best2 = min(v["val_loss"] for v in phase2)
    # the weights that go on are the best ones measured, not the last ones
    assert context_lm_loss(models, EXAMPLES[3:], schedule.max_problem_tokens, 0.5) == pytest.approx(best2, abs=1e-5)
