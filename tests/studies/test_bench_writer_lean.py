"""benchmarks/bench_writer_lean.py's arms write the tokens of the library's writer: checked in fp32 on a tiny Llama,
where no arm's numerics may differ (the compiler is replaced by the identity: the static cache is what is checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks import bench_writer_lean
from mwpgen.lm.loading import load_model_and_tokenizer
from mwpgen.ours.consistency import gumbel_noise
from tests.helpers.tiny_model import tiny_model_dir


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tiny_model_dir(tmp_path_factory.mktemp("tiny") / "m", ["x = num1 + num2 apples", "Sam has num1 pears ."])
    return load_model_and_tokenizer(str(path), Path("unused"))[0]


@pytest.mark.parametrize("arm", ["lean", "static_compiled"])
def test_an_arm_writes_todays_tokens_in_fp32(model, arm, monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda module, **kwargs: module)
    generator = torch.Generator().manual_seed(0)
    vocab = model.get_input_embeddings().weight.shape[0]
    prompts = [model.get_input_embeddings()(torch.randint(0, vocab, (4 + i,), generator=generator)).detach()
               for i in range(3)]  # rows of different lengths: left padding is in play
    noise = gumbel_noise((3, 10, model.get_output_embeddings().weight.shape[0]), generator=generator)
    today = bench_writer_lean.write_today(model, prompts, noise, None)
    assert today.shape == (3, 10)
    assert torch.equal(bench_writer_lean.ARMS[arm](model, prompts, noise, None), today)
