"""Where every stage reads and writes, relative to the project root: one object per (model, dataset, fold).

dvc.yaml spells the same paths with `${item...}`; tests/pipeline/test_dvc_deps.py checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mwpgen.registry import EVALUATOR

# The checkout this library runs from (an editable install: the folder above mwpgen/): params.yaml, dvc.yaml, data/.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class FoldPaths:
    root: Path
    model: str | None  # None: the fold's data-only files (keywords, oracle)
    dataset: str
    fold: int

    @property
    def name(self) -> str:
        """`<model>/<dataset>/fold<k>`: the piece every per-fold path and MLflow run name shares."""
        return f"{self.model + '/' if self.model else ''}{self.dataset}/fold{self.fold}"

    def _of(self, *parts: str, suffix: str = "") -> Path:
        return self.root.joinpath(*parts) / f"{self.name}{suffix}"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def model_dir(self) -> Path:
        """The trained model (a DVC output)."""
        return self._of("models")

    @property
    def resume_dir(self) -> Path:
        """The training state a killed run resumes from; outside DVC's outputs, which DVC deletes first."""
        return self._of("checkpoints")

    @property
    def generations(self) -> Path:
        return self._of("results", "generations", suffix=".csv")

    @property
    def predictions(self) -> Path:
        return self._of("results", "predictions", suffix=".jsonl")

    @property
    def scores(self) -> Path:
        return self._of("results", "scores", suffix=".json")

    @property
    def scores_timing(self) -> Path:
        """The scoring's timings, kept out of scores (as train_timing)."""
        return self._of("timing", "results", "scores", suffix=".json")

    @property
    def train_metrics(self) -> Path:
        return self._of("metrics", "train", suffix=".json")

    @property
    def train_timing(self) -> Path:
        """The training's timings (seconds, rates), kept out of train_metrics so `dvc metrics show` fits a screen."""
        return self._of("timing", "metrics", "train", suffix=".json")

    @property
    def train_curve(self) -> Path:
        return self._of("plots", "train", suffix=".csv")

    @property
    def keywords(self) -> Path:
        return self.root / "data" / "keywords" / self.dataset / f"fold{self.fold}.jsonl"

    @property
    def keyword_stats(self) -> Path:
        return self.root / "metrics" / "keywords" / self.dataset / f"fold{self.fold}.json"

    @property
    def oracle(self) -> Path:
        """The evaluator's parse of every real test problem (its accuracy is the oracle ACC-eq)."""
        return self.root / "data" / "oracle" / self.dataset / f"fold{self.fold}.jsonl"

    @property
    def judge(self) -> Path:
        """The fold's learned consistency judge (stage train_judge; mwpgen/judge/model.py), whatever the model."""
        return self.root / "models" / "judge" / self.dataset / f"fold{self.fold}"

    @property
    def judge_metrics(self) -> Path:
        """How the fold's learned judge measured on the validation readings that chose it (stage train_judge)."""
        return self.root / "metrics" / "judge_train" / self.dataset / f"fold{self.fold}.json"

    @property
    def judge_measurement(self) -> Path:
        """How the fold's judges (the rule, and the learned one where train_judge adopted it) measured against blind
        readings of validation and test equations (stage measure_judge)."""
        return self.root / "metrics" / "judge" / self.dataset / f"fold{self.fold}.json"

    @property
    def judge_verdicts(self) -> Path:
        """Each blind reading measure_judge measured on, with its label and the judges' verdicts on it."""
        return self.root / "results" / "judge" / self.dataset / f"fold{self.fold}.jsonl"

    @property
    def evaluator(self) -> FoldPaths:
        """The same fold's independent evaluator mwp2eq."""
        return FoldPaths(self.root, EVALUATOR.name, self.dataset, self.fold)

    def of(self, model: str | None) -> FoldPaths:
        return FoldPaths(self.root, model, self.dataset, self.fold)
