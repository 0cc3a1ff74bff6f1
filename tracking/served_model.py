"""The served model's definition for MLflow's models-from-code: logged as this file's path (log_ours_model), so the
model is rebuilt from code at load rather than unpickled. The `tracking` and `mwpgen` packages it imports travel
with the logged model (its code_paths)."""

from mlflow.models import set_model

from tracking.pyfunc_model import OursModel

set_model(OursModel())
