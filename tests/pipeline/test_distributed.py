"""Data-parallel training (mwpgen/lm/distributed.py): 2 CPU processes over gloo train the tiny model exactly like one
process at grad_accum 2 (same global batch), and the ranks' shares of the data add up to the single process's steps.

Also the worker: `python -m torch.distributed.run --nproc_per_node 2 tests/pipeline/test_distributed.py MODEL_DIR
OUT_DIR KILL_AT`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mwpgen.batching import seeded_batches
from mwpgen.lm.distributed import rank_examples
from orchestration.prefect_api import free_port

ROOT = Path(__file__).resolve().parents[2]
WORLD = 2
RECORDS = [{"id": str(i), "text": f"Sam has num1 {thing} and gets num2 more . How many {thing} ?",
            "equation": f"x = ( num1 {op} num2 )"}
           for i, (thing, op) in enumerate([(t, o) for t in ("apples", "pens", "cats", "books") for o in "+-*/"])]
KEYWORDS = {r["id"]: ["Sam", r["text"].split()[3]] for r in RECORDS}
# 12 training examples at batch 2 per rank (global batch 4): 3 steps an epoch, 6 in all; 4 validation examples.
SETTINGS = dict(epochs=2, batch_size=2, lr=1e-2, max_length=64, seed=3, mixed_precision=False, log_every=2,
                eval_every=2, save_every=2, max_steps=0, patience=0)
WORKER = {**SETTINGS, "grad_accum": 1}  # each rank at grad_accum 1: together, one process at grad_accum WORLD


def data():
    from mwpgen.lm.prompts import generator_epochs, generator_example

    train = generator_epochs(RECORDS[:12], KEYWORDS, p=0.3, seed=5)  # fresh keyword dropout per epoch
    validation = [generator_example(r["equation"], KEYWORDS[r["id"]], r["text"]) for r in RECORDS[12:]]
    return train, validation


@pytest.mark.parametrize("n, batch_size, world_size", [(12, 2, 2), (13, 2, 2), (23, 3, 4), (8, 4, 2)])
def test_rank_shares_rebuild_the_single_process_steps(n, batch_size, world_size):
    """Rank r's micro-batch j (with the trainer's batching of its share) is the single process's micro-batch
    j*W + r; an incomplete last global batch is dropped; every epoch has its own order."""
    seed = 7

    def examples(epoch):
        return [f"e{epoch}-{i}" for i in range(n)]

    per_rank = n // (world_size * batch_size)
    for epoch in range(3):
        everyone = [[examples(epoch)[i] for i in b] for b in seeded_batches(n, batch_size, seed, epoch)]
        shares = []
        for rank in range(world_size):
            share = rank_examples(examples, batch_size, seed, rank, world_size)(epoch)
            assert len(share) == per_rank * batch_size
            shares.append([[share[i] for i in b] for b in seeded_batches(len(share), batch_size, seed, epoch)])
        for step in range(per_rank):  # at grad_accum 1 per rank: the global step = W micro-batches
            assert [shares[r][step] for r in range(world_size)] == everyone[step * world_size:(step + 1) * world_size]
    with pytest.raises(ValueError, match="one global batch"):
        rank_examples(list(range(3)), 2, seed, 0, 2)(0)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from tests.helpers.tiny_model import tiny_model_dir

    train, validation = data()
    corpus = [e.prompt + " " + e.target for epoch in range(SETTINGS["epochs"]) for e in train(epoch) + validation]
    return tiny_model_dir(tmp_path_factory.mktemp("tiny") / "model", corpus)


def launch(model_dir: Path, out: Path, kill_at: int = 0) -> subprocess.CompletedProcess:
    """torchrun, 2 CPU processes over gloo on a free loopback port, each running `worker` below."""
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(WORLD),
         "--master_addr", "127.0.0.1", "--master_port", str(free_port()), __file__, str(model_dir), str(out),
         str(kill_at)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}, capture_output=True,
        text=True, timeout=300)


def ranks_of(proc: subprocess.CompletedProcess, out: Path) -> list[dict]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.fixture(scope="module")
def uninterrupted(tiny_dir, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp") / "out"
    return ranks_of(launch(tiny_dir, out), out) + [{"out": out}]


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_at_grad_accum_2(tiny_dir, uninterrupted):
    """Per-step losses (mean over ranks), validation curve, checkpoint choice and final weights of 2 ranks at
    batch 2 = one process at batch 2, grad_accum 2 on the same examples. Fails without the gradient all-reduce."""
    from mwpgen.lm.loading import load_model_and_tokenizer
    from mwpgen.lm.training import train_causal_lm

    *ranks, where = uninterrupted
    train, validation = data()
    model, tok = load_model_and_tokenizer(str(tiny_dir), Path("unused"))
    ref = train_causal_lm(model, tok, train, grad_accum=WORLD, validation=validation, length_grouped=False,
                          **SETTINGS)  # the batching data-parallel ranks reproduce (distributed.py)
    got = ranks[0]["result"]
    assert got["steps"] == ref["steps"] == 6
    got_losses, ref_losses = ([h["train_loss"] for h in r["history"]] for r in (got, ref))
    diff = max(abs(a - b) for a, b in zip(got_losses, ref_losses))
    print(f"max |loss difference| per step: {diff:.3g}")
    assert got_losses == pytest.approx(ref_losses, rel=1e-4) and got["final_train_loss"] == got_losses[-1]
    assert [r["val_loss"] for r in got["validations"]] == pytest.approx([r["val_loss"] for r in ref["validations"]],
                                                                        rel=1e-4)
    assert got["best_step"] == ref["best_step"]
    assert [r["train_loss"] for r in got["log"]] == pytest.approx([r["train_loss"] for r in ref["log"]], rel=1e-4)
    assert got["tokens"] == ref["tokens"] == sum(r["result"]["rank_tokens"] for r in ranks)
    assert [r["result"]["rank"] for r in ranks] == [0, 1]

    weights = [r["weights"] for r in ranks]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # the ranks never drift apart
    for k, v in model.state_dict().items():
        torch.testing.assert_close(weights[0][k], v, rtol=1e-4, atol=1e-5)
    saved, _ = load_model_and_tokenizer(str(where["out"] / "model"), Path("unused"))  # rank 0's checkpoint
    assert all(torch.equal(saved.state_dict()[k], weights[0][k]) for k in weights[0])
    assert not (where["out"] / "resume").exists()  # every rank's state removed once the model is saved


@pytest.mark.slow
def test_killed_ranks_resume_bit_for_bit(tiny_dir, uninterrupted, tmp_path):
    """Both ranks killed after step 5 (states at step 4, one per rank): the relaunch ends where the uninterrupted
    launch ended."""
    from mwpgen.resume import STATE_FILE

    out = tmp_path / "out"
    assert launch(tiny_dir, out, kill_at=5).returncode != 0
    steps = [torch.load(out / "resume" / f"rank{r}" / STATE_FILE, weights_only=True)["trainer"]["step"]
             for r in range(WORLD)]
    assert steps == [4, 4]
    resumed = ranks_of(launch(tiny_dir, out), out)
    for got, ref in zip(resumed, uninterrupted):
        assert got["result"]["resumed_from"] == 4
        for key in ("rank_losses", "validations", "tokens", "best_step", "final_train_loss"):
            assert got["result"][key] == ref["result"][key]
        for key in ("history", "log"):  # without their timings
            assert [r["train_loss"] for r in got["result"][key]] == [r["train_loss"] for r in ref["result"][key]]
        assert all(torch.equal(got["weights"][k], ref["weights"][k]) for k in ref["weights"])
    assert not (out / "resume").exists()


class Killed(Exception):
    pass


def worker(model_dir: str, out: Path, kill_at: int) -> None:
    """One rank of the test's torchrun launch: train (killed after step `kill_at`, if not 0), then save its result
    and weights for the test to compare."""
    from mwpgen.lm.distributed import train_causal_lm_distributed
    from mwpgen.lm.loading import load_model_and_tokenizer

    torch.set_num_threads(1)
    train, validation = data()
    model, tok = load_model_and_tokenizer(model_dir, Path("unused"))

    def kill(step: int) -> None:
        if step == kill_at:
            raise Killed

    result = train_causal_lm_distributed(
        model,
        tok,
        train,
        validation=validation,
        device="cpu",
        checkpoint_dir=out / "model",
        resume_dir=out / "resume",
        on_step=kill,
        **WORKER,
    )
    torch.save({"result": result, "weights": model.state_dict()}, out / f"rank{result['rank']}.pt")


if __name__ == "__main__":
    worker(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
