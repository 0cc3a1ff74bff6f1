"""Prefect flows: one per DVC stage (`python -m flows.<stage>`), plus `flows.pipeline` that runs them all."""
