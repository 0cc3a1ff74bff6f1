"""dvc.yaml's deps are exact: each stage depends on every project file its command imports and on no other code (a
dep it never runs would invalidate its outputs for nothing: hours of training for an edit to the translator); its
per-fold outputs are the paths mwpgen.paths.FoldPaths gives; and the library never imports the orchestration tools."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from mwpgen.paths import FoldPaths
from mwpgen.registry import EVALUATOR
from orchestration.code_deps import code_deps, rewrite

ROOT = Path(__file__).resolve().parents[2]
DVC_YAML = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
STAGES = yaml.safe_load(DVC_YAML)["stages"]


def test_writing_the_code_deps_would_change_nothing():
    """`python -m orchestration.code_deps` writes them; a stale dvc.yaml names the stages and files that differ."""
    text, changes = rewrite(DVC_YAML, ROOT)
    assert not changes, "dvc.yaml code deps differ from the imports (run `python -m orchestration.code_deps`):\n" + \
        "\n".join(f"  {stage}: -{removed} +{added}" for stage, (removed, added) in changes.items())
    assert text == DVC_YAML


def test_a_removed_or_extra_dependency_is_rewritten():
    text = DVC_YAML.replace("      - mwpgen/data/masking.py\n", "", 1)
    _, changes = rewrite(text, ROOT)
    assert any("mwpgen/data/masking.py" in added for _, added in changes.values())
    stage = (
        "  evaluate:\n    cmd: python -m flows.evaluate\n    deps:\n      - mwpgen/data/translate.py\n      - data/x\n"
    )
    text, changes = rewrite(stage, ROOT)
    assert changes["evaluate"][0] == ["mwpgen/data/translate.py"]
    assert text.endswith("      - data/x\n") and "mwpgen/data/masking.py" in text


def test_a_package_run_whole_is_one_folder_dep():
    deps = code_deps(ROOT, "python -m flows.train_ours --dataset a --fold 0")
    assert "mwpgen/ours" in deps and not any(d.startswith("mwpgen/ours/") for d in deps)


def _rendered_outputs(stage: dict, item: dict) -> list[str]:
    out = []
    for key in ("outs", "metrics", "plots"):
        for entry in stage.get(key, []):
            path = next(iter(entry)) if isinstance(entry, dict) else entry
            out.append(re.sub(r"\$\{item\.(\w+)\}", lambda m: str(item[m.group(1)]), path))
    return out


def test_per_fold_outputs_are_the_paths_of_mwpgen_paths():
    item = {"model": "gpt_pre", "dataset": "arithmetic", "fold": 3, "variant": "tfidf", "method": "dpo"}
    for name, stage in STAGES.items():
        if "matrix" not in stage:
            continue
        cmd = re.sub(r"\$\{item\.(\w+)\}", lambda m: str(item[m.group(1)]), stage["cmd"])
        model = re.search(r"--model (\S+)", cmd)
        # --model names the model; train_ours trains "ours", train_evaluator the evaluator, ablate "ours-<variant>",
        # tune "ours-<method>", keywords none
        models = ([model.group(1)] if model else ["ours-tfidf"] if "--variant" in cmd else ["ours-dpo"]
                  if "--method" in cmd else [None, "ours", EVALUATOR.name])
        allowed = set()
        for m in models:
            paths = FoldPaths(ROOT, m, item["dataset"], item["fold"])
            allowed |= {str(getattr(paths, p).relative_to(ROOT)) for p in
                        ("model_dir", "generations", "predictions", "scores", "train_metrics", "train_curve",
                         "train_timing", "scores_timing", "keywords", "keyword_stats", "oracle", "judge",
                         "judge_metrics", "judge_measurement", "judge_verdicts")}
        stray = [p for p in _rendered_outputs(stage, item) if p not in allowed]
        assert not stray, f"stage {name}: outputs {stray} are not paths of mwpgen.paths.FoldPaths"


def test_mwpgen_never_imports_prefect_dvc_or_mlflow():
    banned = {"prefect", "dvc", "mlflow"}
    found = []
    for path in sorted((ROOT / "mwpgen").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in banned]
    assert not found, "mwpgen imports orchestration code: " + ", ".join(found)


def test_bytecode_caches_are_not_dependencies():
    """Code folders are stage dependencies (mwpgen/lm, ...): the __pycache__ Python writes into them must not change
    their hash, or a clone on a machine that writes bytecode would find every stage changed (.dvcignore)."""
    import subprocess
    import sys

    def ignored(path: str) -> bool:
        return subprocess.run([sys.executable, "-m", "dvc", "check-ignore", path], cwd=ROOT,
                              capture_output=True).returncode == 0

    assert ignored("mwpgen/lm/__pycache__/training.cpython-311.pyc") and ignored("flows/__pycache__/train.pyc")
    assert not ignored("mwpgen/lm/training.py")


def test_every_param_a_stage_lists_is_in_params_yaml():
    """`dvc repro` refuses a stage whose params key is missing from params.yaml (an empty mapping counts)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    missing = []
    for name, stage in STAGES.items():
        for key in stage.get("params", []):
            node = params
            for part in str(key).split("."):
                if not isinstance(node, dict) or part not in node:
                    missing.append(f"{name}: {key}")
                    break
                node = node[part]
    assert not missing, "dvc.yaml lists params that params.yaml lacks:\n" + "\n".join(missing)


def test_the_judge_stages_depend_on_every_reading_file_they_read():
    """mwpgen/judge/readings.py reads files by pattern; dvc.yaml names them (or their folder), so a reading added to
    a set reruns the stages that read it, and a stage depends on no reading set it never opens."""
    from mwpgen.judge.readings import CHOOSING_SETS, files

    def uncovered(stage: str, sets) -> list[str]:
        deps = [str(d).rstrip("/") for d in STAGES[stage]["deps"]]
        return [str(f.relative_to(ROOT)) for f in files(ROOT, sets)
                if not any(str(f.relative_to(ROOT)) == d or str(f.relative_to(ROOT)).startswith(d + "/") for d in deps)]

    assert not uncovered("train_judge", CHOOSING_SETS) and not uncovered("measure_judge", None)
    read = {str(f.relative_to(ROOT).parent) for f in files(ROOT, CHOOSING_SETS)}
    labels = [d for d in STAGES["train_judge"]["deps"] if d.startswith("data/labels/")]
    assert all(any(d == r or d.startswith(r + "/") for r in read) for d in labels), labels


def test_every_per_fold_path_ablate_reads_is_made_by_the_experiments_stages():
    """ablate runs over ablation.datasets x ablation.folds; each per-fold path it reads (the evaluator, keywords, the
    learned judge) is an output of a stage run over experiment.datasets x experiment.folds, and the params refuse an
    ablation fold outside those (mwpgen/config/schema.py), so no ablate dependency is a file nothing makes."""
    made_by = {}
    for name, stage in STAGES.items():
        matrix = stage.get("matrix", {})
        for key in ("outs", "metrics", "plots"):
            for entry in stage.get(key, []):
                made_by[next(iter(entry)) if isinstance(entry, dict) else entry] = (name, matrix.get("dataset"),
                                                                                    matrix.get("fold"))
    per_fold = [d for d in STAGES["ablate"]["deps"] if "${item.fold}" in d]
    assert "models/judge/${item.dataset}/fold${item.fold}" in per_fold
    unmade = [d for d in per_fold if made_by.get(d, (None,))[1:] != ("${experiment.datasets}", "${experiment.folds}")]
    assert not unmade, f"ablate reads per-fold paths no experiment-matrix stage makes: {unmade}"
    from mwpgen.config.files import ParamsError
    from mwpgen.config.schema import validate_params

    with pytest.raises(ParamsError, match="ablation.datasets x ablation.folds: arithmetic fold 2 not in"):
        validate_params({"ablation": {"variants": ["tfidf"], "folds": [2]}})
