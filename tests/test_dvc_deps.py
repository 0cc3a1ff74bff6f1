"""dvc.yaml's deps are exact: each stage depends on every project file its command imports and on no other code (a
dep it never runs would invalidate its outputs for nothing: hours of training for an edit to the translator); its
per-fold outputs are the paths mwpgen.paths.FoldPaths gives; and the library never imports the orchestration tools."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from import_closure import closure
from mwpgen.evaluation.blind_labels import measurement_paths
from mwpgen.paths import FoldPaths

ROOT = Path(__file__).resolve().parent.parent
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def _inert_init(path: Path) -> bool:
    """A package __init__ that imports and defines nothing (a docstring, a version string) changes no output."""
    if path.name != "__init__.py":
        return False
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return not any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree))


CODE = ("mwpgen/", "tasks/", "flows/", "orchestration/", "tracking/")


def _runs(stage: dict) -> set[str]:
    """The project files the stage's command really runs: its import closure, less inert package __init__s."""
    module = re.search(r"python -m (\S+)", stage["cmd"]).group(1)
    return {str(f) for f in closure(ROOT, module) if not _inert_init(f)}


def missing_deps(stage: dict) -> list[str]:
    """Project files the stage's command imports that none of its deps (file or folder) covers."""
    deps = [str(d).rstrip("/") for d in stage.get("deps", [])]
    covered = lambda f: any(f == d or f.startswith(d + "/") for d in deps)  # noqa: E731
    return sorted(f for f in _runs(stage) if not covered(f))


def extra_deps(stage: dict) -> list[str]:
    """Code deps the stage never runs: a file outside its import closure, or a folder holding one."""
    runs = _runs(stage)
    extra = []
    for dep in (str(d).rstrip("/") for d in stage.get("deps", [])):
        if not dep.startswith(CODE):
            continue  # data
        files = [dep] if dep.endswith(".py") else \
            [str(p.relative_to(ROOT)) for p in sorted((ROOT / dep).rglob("*.py")) if "__pycache__" not in p.parts]
        extra += [f"{dep} ({f})" if f != dep else dep for f in files
                  if f not in runs and not _inert_init(Path(f))]
    return extra


def test_every_stage_depends_on_the_code_it_runs():
    problems = {name: missing_deps(stage) for name, stage in STAGES.items()}
    problems = {name: files for name, files in problems.items() if files}
    assert not problems, "dvc.yaml deps miss code the stage imports:\n" + "\n".join(
        f"  stage {name}: {', '.join(files)}" for name, files in problems.items())


def test_no_stage_depends_on_code_it_does_not_run():
    problems = {name: extra_deps(stage) for name, stage in STAGES.items()}
    problems = {name: paths for name, paths in problems.items() if paths}
    assert not problems, "dvc.yaml deps name code the stage never imports:\n" + "\n".join(
        f"  stage {name}: {', '.join(paths)}" for name, paths in problems.items())


def test_a_removed_dependency_is_caught():
    stage = dict(STAGES["train_ours"])
    stage["deps"] = [d for d in stage["deps"] if d != "mwpgen/ours"]
    assert "mwpgen/ours/selector.py" in missing_deps(stage)
    stage = dict(STAGES["evaluate"])
    stage["deps"] = [d for d in stage["deps"] if d != "mwpgen/data/masking.py"]
    assert "mwpgen/data/masking.py" in missing_deps(stage)


def test_an_extra_dependency_is_caught():
    stage = dict(STAGES["evaluate"])
    assert not extra_deps(stage)
    assert extra_deps({**stage, "deps": [*stage["deps"], "mwpgen/data/translate.py"]}) == ["mwpgen/data/translate.py"]
    assert "mwpgen/ours (mwpgen/ours/training.py)" in extra_deps({**stage, "deps": [*stage["deps"], "mwpgen/ours"]})


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
        # --model names the model; train_ours trains "ours", ablate "ours-<variant>", tune "ours-<method>", keywords none
        models = ([model.group(1)] if model else ["ours-tfidf"] if "--variant" in cmd else ["ours-dpo"]
                  if "--method" in cmd else [None, "ours"])
        allowed = set()
        for m in models:
            paths = FoldPaths(ROOT, m, item["dataset"], item["fold"])
            allowed |= {str(getattr(paths, p).relative_to(ROOT)) for p in
                        ("model_dir", "generations", "predictions", "scores", "train_metrics", "train_curve",
                         "train_timing", "scores_timing",
                         "keywords", "keyword_stats", "oracle", "judge", "judge_metrics")}
        # the judge's measurement of a fold (stage measure_judge)
        allowed |= {str(p.relative_to(ROOT)) for p in measurement_paths(ROOT, item["dataset"], item["fold"])}
        stray = [p for p in _rendered_outputs(stage, item) if p not in allowed]
        assert not stray, f"stage {name}: outputs {stray} are not paths of mwpgen.paths.FoldPaths (or measurement_paths)"


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
    """mwpgen/data/readings.py reads files by pattern; dvc.yaml names them (or their folder), so a reading added to
    a set reruns the stages that read it, and a stage depends on no reading set it never opens."""
    from mwpgen.data.readings import CHOOSING_SETS, files

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
