"""studies.selector_sweep.selector_sweep, the seed check that studies/selector_sweep/tracked_sweep.py tracks and that
runs alone on a machine with neither Prefect nor MLflow: one row per (setting, seed), the table rewritten after each
row, and a setting chosen only when it holds on every seed."""

from __future__ import annotations

import json

from mwpgen.config.schema import load_params
from studies.selector_sweep.selector_sweep import choose, holds, phase1_params, sweep
from tests.helpers.scratch_project import ROOT
from tests.helpers.tiny_project import tiny_arithmetic_project


def _stats(median: float, none: float) -> dict:
    return {"words_median": median, "none_share": none}


def test_a_setting_is_chosen_only_when_it_holds_on_every_seed():
    assert holds(_stats(4, 0.0)) and holds(_stats(2, 0.05))
    assert not holds(_stats(0, 0.6)) and not holds(_stats(7, 0.0)) and not holds(_stats(3, 0.06))
    rows = [{"setting": "a", "holds": True, "val_loss": 1.0}, {"setting": "a", "holds": False, "val_loss": 0.5},
            {"setting": "b", "holds": True, "val_loss": 1.4}, {"setting": "b", "holds": True, "val_loss": 1.2}]
    assert choose(rows) == "b"  # a has the lower loss, but one of its seeds collapsed
    assert choose(rows[:2]) is None


def test_steps_cut_phase1_and_zero_keeps_its_schedule():
    params = load_params(ROOT / "params.yaml")
    base = params.train.ours
    cut = phase1_params(base, {"selector_init": "prior"}, 40)
    assert cut.phase1.max_steps == 40 and cut.phase2.max_steps == 0 and cut.phase2.epochs == 0
    assert cut.selector_init == "prior" and not cut.equation_loss and not cut.mwp2eq_in_phase1
    assert phase1_params(base, {}, 0).phase1 == base.phase1


def test_sweep_writes_one_row_per_setting_and_seed(tmp_path):
    params_path, _, _ = tiny_arithmetic_project(tmp_path)
    seen = []
    out = tmp_path / "sweep_seeds"
    report = sweep(load_params(params_path), "arithmetic", 0, 2, 0, "seeds", [1, 2], "cpu", out, "test machine",
                   on_row=lambda setting, row: seen.append((setting, row["seed"])), root=tmp_path)
    assert seen == [({"selector_init": "keywords"}, 1), ({"selector_init": "keywords"}, 2),
                    ({"selector_init": "prior"}, 1), ({"selector_init": "prior"}, 2)]
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["rows"] == json.loads(json.dumps(report["rows"])) and saved["machine"] == "test machine"
    for row in report["rows"]:
        assert row["best_step"] is not None and row["val_loss"] > 0 and row["holds"] == holds(row["validation"])
        assert 0 <= row["test"]["none_share"] <= 1 and row["test"]["q_min"] <= row["test"]["q_max"]
    table = out.with_suffix(".md").read_text()
    assert table.count("| selector_init keywords |") == 2 and table.count("| selector_init prior |") == 2
    assert "test machine" in table and "Chosen:" in table


def test_the_machine_names_the_precision_it_trained_in():
    from studies.selector_sweep.selector_sweep import machine_name

    assert machine_name("cpu", mixed_precision=False).endswith(", fp32 (mixed_precision off)")
    assert machine_name("cpu").endswith((", native bf16", ", fp32"))
