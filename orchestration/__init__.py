"""Orchestration: the whole pipeline in one process (`pipeline.py`), one fold on one machine (`fold_run.py`) and
the folds fanned out over Prefect workers (`fan_out.py`). Each drives DVC, whose stages are the flows of `flows/`."""
