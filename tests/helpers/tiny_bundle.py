"""A tiny ours bundle and learned judge as the stages save them, and `mwpgen generate` run in process: what the
command line's, the served model's and the tuning's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from mwpgen.generate import cli
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.lm.prompts import generator_example, mwp2eq_example
from mwpgen.ours.bundle import save_bundle
from tests.helpers.tiny_model import tiny_model_dir

RECORDS = [
    ("x = num1 - num2", "Joan found num1 shells on the beach . She gave num2 away . How many are left ?", ("Joan",)),
    ("x = num1 * num2", "Tom has num1 boxes with num2 candies each . How many candies ?", ("boxes", "candies")),
    ("x = num1 + num2", "A jar holds num1 marbles . Sam adds num2 marbles . How many now ?", ("jar",)),
]
FAST = ["--max-new-tokens", "12"]


def make_tiny_bundle(path: Path, with_mwp2eq: bool = True) -> Path:
    """A bundle as train_ours saves it (generator, co-trained mwp2eq sharing its tokenizer), randomly initialised."""
    corpus = [generator_example(e, k, p).prompt + " " + p for e, p, k in RECORDS]
    corpus += [mwp2eq_example(p, e).prompt + " " + e for e, p, _ in RECORDS]
    base = tiny_model_dir(path.parent / f"{path.name}-base", corpus)
    generator, tokenizer = load_model_and_tokenizer(str(base), Path("unused"))
    mwp2eq = load_model_and_tokenizer(str(base), Path("unused"), pretrained=False, seed=1)[0] if with_mwp2eq else None
    settings = {"context": "selector", "selector": "residual", "threshold": 0.5, "max_problem_tokens": 96,
                "context_tokens": 24}
    return save_bundle(path, generator, tokenizer, None, settings, mwp2eq=mwp2eq)


def make_tiny_judge(base: Path, out: Path, threshold: float = 0.5) -> Path:
    """A learned judge (mwpgen/judge/model.py) over one layer of the tiny LM at `base`, its head fitted on four
    readings, saved as the train_judge stage saves one."""
    from mwpgen.data.equation_shapes import SHAPES
    from mwpgen.judge.fit import fit_head
    from mwpgen.judge.model import LearnedJudge

    judge = LearnedJudge.from_lm(base, layer=1)
    problems = [p for _, p, _ in RECORDS] + ["Joan found num1 shells . How many ?"]
    equations = [e for e, _, _ in RECORDS] + ["x = num1 + num2"]
    fit_head(judge, judge.hidden(problems, equations), [1, 1, 0, 0], l2=1.0)
    judge.info.threshold = threshold
    # as train_judge saves one: "verified" held to a threshold per shape, here the judge's own for every shape
    judge.info.verified = {"precision_target": 0.9, "min_accepted": 1, "thresholds": dict.fromkeys(SHAPES, threshold),
                           "validation": {}}
    return judge.save(out)


def check_verdicts(judge_dir: Path, problems: list[dict]) -> None:
    """Each shown problem's verdict is its judge's on the unrounded p (the output's judge_probability is rounded to
    4 places, so a verdict is never checked against it): p read again, alone, by the saved judge."""
    from mwpgen.judge.model import LearnedJudge

    judge = LearnedJudge.load(judge_dir)
    p = judge.probabilities([q["masked_text"] for q in problems], [q["equation"] for q in problems], batch_size=1)
    for q, exact in zip(problems, p):
        assert q["judge_probability"] == pytest.approx(exact, abs=1e-4)
        if abs(exact - judge.info.threshold) > 1e-5:  # closer, float noise between batches may tip it
            assert q["verified"] is (exact >= judge.info.threshold)



def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["generate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def tiny_served_model(folder: Path):
    """The served MLflow model (tracking/pyfunc_model.py) loaded in process over a tiny bundle made in `folder`."""
    from types import SimpleNamespace

    from tracking.pyfunc_model import OursModel

    model = OursModel()
    model.load_context(SimpleNamespace(artifacts={"bundle": str(make_tiny_bundle(folder / "ours"))}))
    return model
