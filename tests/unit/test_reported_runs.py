"""Which (dataset, fold) runs the report's tables show (flows/report.py reported_runs): the params' own, and what
runs of another profile scored (MAWPS by `--profile mawps`, Arithmetic's folds 1-4 by `--profile folds`), so the
committed tables summarise every fold that was run while params.yaml stays the default one."""

from __future__ import annotations

from flows.report import reported_runs


def test_the_folds_and_datasets_another_profile_scored_are_shown_beside_the_params_own():
    scored = {("arithmetic", 0), ("arithmetic", 2), ("arithmetic", 1), ("mawps", 0)}
    elsewhere, datasets, runs = reported_runs(["arithmetic"], [0], 5, lambda d, k: (d, k) in scored)
    assert elsewhere == {("arithmetic", 1), ("arithmetic", 2), ("mawps", 0)}
    assert datasets == ["arithmetic", "mawps"]
    assert runs == [("arithmetic", 0), ("arithmetic", 1), ("arithmetic", 2), ("mawps", 0)]


def test_the_params_own_runs_are_shown_before_they_are_scored_and_nothing_else_is_invented():
    elsewhere, datasets, runs = reported_runs(["arithmetic"], [0, 1], 5, lambda d, k: False)
    assert elsewhere == set() and datasets == ["arithmetic"] and runs == [("arithmetic", 0), ("arithmetic", 1)]
