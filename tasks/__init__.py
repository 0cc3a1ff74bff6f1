"""Prefect tasks: thin wrappers that call `mwpgen` and own retries; the unit a flow retries or observes."""
