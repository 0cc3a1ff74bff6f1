"""MLflow glue: one tracked run per stage (`runs.py`) and the trained ours as an MLflow pyfunc model
(`pyfunc_model.py`). The library (`mwpgen/`) never imports MLflow; these modules are where it meets it."""
