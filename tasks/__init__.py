"""Prefect tasks: thin wrappers that call `mwpgen`, log to MLflow, and own retries."""
