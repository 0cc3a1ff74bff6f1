"""params.yaml: its schema (`schema.py`: every section, key, default and check), the reading of YAML 1.2 files
(`files.py`), profiles overlaid onto it (`profiles.py`) and its description (`python -m mwpgen.config`)."""
