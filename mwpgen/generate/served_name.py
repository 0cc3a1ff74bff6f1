"""The name the served model is logged and registered under in MLflow: one definition for the command line (which
turns an MLflow run id into runs:/RUN/<name>) and tracking/pyfunc_model.py (which logs and registers it). A module of
its own so the register stage, which imports it, depends on this line and not on the command line's code."""

MLFLOW_MODEL_NAME = "mwpgen-ours"
