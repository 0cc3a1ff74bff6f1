"""mwpgen/tuning.py: pairs and RFT examples from readings, and steps that move the generator the way each
objective says (a tiny random model, a few steps)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mwpgen import resume, tuning
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import generator_example
from mwpgen.ours.inputs import JointExample
from tests.helpers.tiny_model import tiny_model_dir

RIGHT = "Sam has num1 apples . He buys num2 more . How many apples does he have ?"
WRONG = "Sam has num1 apples . He eats num2 . How many apples are left ?"
READINGS = [
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": RIGHT, "label": 1},
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": WRONG, "label": 0},
    {"id": "1", "equation": "x = num1 + num2", "context": "Sam apples", "generated": WRONG + " ?", "label": 0},
    {"id": "2", "equation": "x = num1 - num2", "context": "Sam", "generated": WRONG, "label": 1},
    {"id": "3", "equation": "x = num1 * num2", "context": "boxes", "generated": RIGHT, "label": 0},
]


def _generator(tmp_path: Path):
    corpus = [generator_example(r["equation"], r["context"].split(), r["generated"]).prompt + " " + r["generated"]
              for r in READINGS]
    model, tokenizer = load_model_and_tokenizer(str(tiny_model_dir(tmp_path / "tiny", corpus)), Path("unused"))
    torch.manual_seed(0)
    return model, tokenizer


def test_pairs_join_a_right_and_a_wrong_candidate_of_one_problem_only():
    pairs = tuning.preference_pairs(READINGS, per_group=5, seed=1)
    assert len(pairs) == 2  # problem 1: one right x two wrong; problems 2 and 3 have one side only
    assert all(p.chosen.problem == RIGHT and p.chosen.keywords == ("Sam", "apples") for p in pairs)
    assert len(tuning.preference_pairs(READINGS, per_group=1, seed=1)) == 1


def test_rft_examples_are_the_right_candidates_and_the_mix():
    training = [JointExample("x = num1 + num2", f"problem {i}", ()) for i in range(10)]
    examples = tuning.rft_examples(READINGS, training, mix=2.0, seed=1)
    assert sorted(e.problem for e in examples if not e.problem.startswith("problem")) == sorted([RIGHT, WRONG])
    assert sum(e.problem.startswith("problem") for e in examples) == 4


def test_dpo_steps_raise_the_margin_of_the_right_candidate(tmp_path):
    model, tok = _generator(tmp_path)
    pairs = tuning.preference_pairs(READINGS, per_group=5, seed=1)
    reference = tuning.reference_logprobs(model, tok, pairs, width=4, max_problem_tokens=40)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    first = tuning.tune_step(model, tok, optimizer, method="dpo", batch=pairs, width=4, max_problem_tokens=40,
                             reference=reference)
    assert abs(first["margin"]) < 1e-4  # the policy starts as the reference
    for _ in range(5):
        last = tuning.tune_step(model, tok, optimizer, method="dpo", batch=pairs, width=4, max_problem_tokens=40,
                                reference=reference)
    assert last["margin"] > 0.1 and last["train_loss"] < first["train_loss"]


def test_rft_steps_lower_the_loss_of_the_right_candidates(tmp_path):
    model, tok = _generator(tmp_path)
    batch = tuning.rft_examples(READINGS, [], mix=0.0, seed=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = [tuning.tune_step(model, tok, optimizer, method="rft", batch=batch, width=4,
                               max_problem_tokens=40)["train_loss"] for _ in range(6)]
    assert losses[-1] < losses[0]


def test_tune_generator_runs_seeded_epochs_within_max_steps_and_logs(tmp_path):
    model, tok = _generator(tmp_path)
    pairs = tuning.preference_pairs(READINGS, per_group=5, seed=1)
    logged = []
    out = tuning.tune_generator(model, tok, "dpo", pairs, epochs=3, max_steps=5, batch_size=1, lr=1e-2, beta=0.1,
                                seed=0, width=4, max_problem_tokens=40, log_every=2, on_log=logged.append,
                                save_every=10)
    assert out["steps"] == 5 and [h["step"] for h in out["history"]] == [1, 2, 3, 4, 5]
    assert [h["epoch"] for h in out["history"]] == [0, 0, 1, 1, 2]  # 2 pairs: 2 steps an epoch
    assert [r["step"] for r in logged] == [2, 4, 5] and "margin" in logged[0]  # and the last, partial window
    assert out["final_train_loss"] == out["history"][-1]["train_loss"] and out["best_step"] is None
    assert not model.training  # handed back for generation


class Killed(Exception):
    pass


def test_a_killed_rft_tuning_resumes_to_the_same_weights(tmp_path):
    """RFT through the one trainer: a state every 2 steps; killed after step 3, the rerun replays step 3 from the
    state of step 2 and ends with the weights and losses of a tuning never killed (dropout on: the RNG state is
    part of the state)."""
    data = tuning.rft_examples(READINGS, [JointExample("x = num1 + num2", RIGHT, ("Sam",))] * 4, mix=2.0, seed=1)
    settings = dict(epochs=2, max_steps=0, batch_size=2, lr=1e-2, beta=0.1, seed=3, width=4, max_problem_tokens=40,
                    log_every=2, save_every=2, resume_dir=tmp_path / "state")

    def tuned(on_step=None):
        model, tok = _generator(tmp_path)
        return model, tuning.tune_generator(model, tok, "rft", data, on_step=on_step, **settings)

    reference, ref = tuned()
    assert ref["steps"] == 6 and torch.load(tmp_path / "state" / "state.pt")["trainer"]["step"] == 4  # not at 6
    resume.remove(tmp_path / "state")  # the caller's job, once the tuned bundle is saved (tasks/tune.py)

    def kill(step):
        if step == 3:
            raise Killed

    with pytest.raises(Killed):
        tuned(kill)
    assert (tmp_path / "state" / "state.pt").exists()
    resumed, out = tuned()
    assert out["resumed_from"] == 2
    assert [h["train_loss"] for h in out["history"]] == [h["train_loss"] for h in ref["history"]]
    assert all(torch.equal(a, b) for a, b in zip(reference.state_dict().values(), resumed.state_dict().values()))


def test_tune_generator_refuses_no_data(tmp_path):
    model, tok = _generator(tmp_path)

    with pytest.raises(ValueError, match="no rft data"):
        tuning.tune_generator(model, tok, "rft", [], epochs=1, max_steps=0, batch_size=2, lr=1e-3, beta=0.1,
                              seed=0, width=4, max_problem_tokens=40, log_every=10, save_every=10)


def test_unique_candidates_keep_one_reading_per_text():
    doubled = READINGS + [dict(READINGS[0])]
    assert tuning.unique_candidates(doubled) == READINGS


def test_the_tune_task_saves_a_bundle_that_loads_as_ours_does(tmp_path):
    """tasks/tune.py on a tiny ours: both methods save a bundle with the tuned generator (changed), ours' mwp2eq and
    settings, and what it was tuned by."""
    import pytest

    from mwpgen.config.schema import validate_params
    from mwpgen.ours.bundle import bundle_settings, load_bundle, load_mwp2eq
    from tasks.tune import tune_ours_bundle
    from tests.helpers.tiny_bundle import make_tiny_bundle

    base = make_tiny_bundle(tmp_path / "ours")
    params = validate_params(
        {
            "train": {"device": "cpu", "mixed_precision": False},
            "tuning": {"epochs": 3, "max_steps": 2, "batch_size": 2, "lr": 1e-2, "pairs_per_group": 5},
        }
    )
    train = [{"equation": r["equation"], "text": r["generated"]} for r in READINGS]
    before = load_bundle(base)[0].model.layers[0].mlp.up_proj.weight.clone()
    for method in ("rft", "dpo"):
        out = tmp_path / f"ours-{method}"
        result = tune_ours_bundle.fn(params, method, base, out, READINGS, train, resume_dir=tmp_path / "state")
        # the saved bundle superseded it and result["readings"] == len(READINGS)
        assert result["steps"] == 2 and not (tmp_path / "state").exists()
        settings = bundle_settings(out)
        assert settings["tuned"]["method"] == method and settings["context_tokens"] == 24
        generator = load_bundle(out)[0]
        assert not torch.equal(generator.model.layers[0].mlp.up_proj.weight, before)
        assert load_mwp2eq(out) is not None
    assert result["pairs"] == 2
    with pytest.raises(ValueError, match="no dpo data"):
        tune_ours_bundle.fn(params, "dpo", base, tmp_path / "none", READINGS[3:], train)


def test_the_validation_comparison_pairs_a_tuned_model_with_ours_by_equation(tmp_path):
    from studies.reading.blind_reading import write_rows
    from studies.tuning.compare_validation import compare

    key, read = [], []
    for n, (model, eq_id, label) in enumerate([("ours", "1", 0), ("ours", "2", 1), ("ours-rft", "1", 1),
                                               ("ours-rft", "2", 1), ("ours-rft", "3", 1)]):
        key.append({"uid": f"k{n}", "split": "validation", "id": eq_id, "shape": "+", "model": model,
                    "source": "greedy", "sample": "0"})
        read.append({"uid": f"k{n}", "label": label})
    write_rows(tmp_path / "key.csv", key, list(key[0]))
    write_rows(tmp_path / "labels" / "batch_01.csv", read, ["uid", "label"])
    result = compare(tmp_path, "ours")
    assert result["ours greedy"] == {"n": 2, "right": 1}
    # equation 3 has no ours candidate: counted in its own share, left out of the paired difference
    assert result["ours-rft greedy"]["right"] == 3 and result["ours-rft greedy"]["minus_baseline"]["n"] == 2
    assert result["ours-rft greedy"]["minus_baseline"]["mean"] == 0.5


def test_tune_refuses_a_fold_whose_test_problems_its_readings_were_written_for(tmp_path, monkeypatch):
    """The corpora are of Arithmetic fold 0's training problems, folds 1-4's test problems: a fold whose test set
    holds one of them is refused before any model loads."""
    from prefect.logging import disable_run_logger

    import flows.tune as stage
    from mwpgen.config.schema import validate_params
    from mwpgen.io import write_json
    from mwpgen.judge.readings import tuning_candidates
    from mwpgen.paths import PROJECT_ROOT

    params = validate_params({})
    some = tuning_candidates(PROJECT_ROOT, params.tuning.corpora, params.tuning.candidates_from)[0]["id"]
    write_json(tmp_path / "splits" / "arithmetic.json", {"folds": [[], [some], [], [], []]})
    monkeypatch.setattr(stage, "DATA", tmp_path)
    with pytest.raises(ValueError, match=rf"tune: 1 of its readings' problems are test problems of arithmetic fold 1 "
                                         rf"\(ids {some}\)"), disable_run_logger():
        stage.tune.fn(params, "rft", "arithmetic", 1)
