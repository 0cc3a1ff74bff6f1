"""Prefect flows: one per DVC stage (`python -m flows.<stage>`), with `common.py` what every stage does first;
plus two flows that are not stages: the selector sweep and data-parallel training. `orchestration/` runs them."""
