"""mwpgen: controllable math word problem generation (Wang, Lan & Baraniuk, EMNLP 2021).

Plain Python library: it never imports prefect, dvc or mlflow (see docs/architecture.md).
"""

__version__ = "0.1.0"
