"""Data-parallel training of the causal LM (torch.distributed; one process per device, started by torchrun).

W processes at micro-batch size b train exactly like ONE process at b with `grad_accum` W: the same global batch of
W*b examples in every step, the same gradient (the mean of the W micro-batch gradients), the same clipping and Adam
step. Three pieces make `mwpgen.lm.training.train_causal_lm` data-parallel without changing it:

- `rank_examples`: each rank's share of the data, laid out so the trainer's own seeded batching picks, at step s,
  micro-batch s*W + r of the single process's batching (`mwpgen.batching.seeded_batches`) over the whole list;
- `average_gradients`: hooks that all-reduce every gradient as soon as backward has accumulated it (what
  DistributedDataParallel does, here by hooks, so the trainer, the state_dict keys and save_pretrained stay
  those of the plain model);
- `train_causal_lm_distributed`: joins torchrun's process group, starts every rank from rank 0's weights, and
  runs the trainer on each rank (checkpoint and callbacks on rank 0; validation on every rank, whose identical
  weights give identical early-stopping and checkpoint decisions).

Each epoch drops the examples of an incomplete last global batch (n mod W*b), so every rank runs the same steps.
The batches are the plain seeded order (`length_grouped=False`): a rank's share cannot be laid out for batches that
its own examples' lengths would regroup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from mwpgen import resume
from mwpgen.batching import seeded_batches
from mwpgen.lm.training import Examples, train_causal_lm

T = TypeVar("T")


def rank_examples(examples: Sequence[T] | Callable[[int], Sequence[T]], batch_size: int, seed: int, rank: int,
                  world_size: int) -> Callable[[int], list[T]]:
    """`epoch -> rank's examples`: with `seeded_batches(m, batch_size, seed, epoch)` over its m examples (the trainer's
    batching), rank r's micro-batch j is micro-batch j*world_size + r of `seeded_batches(n, batch_size, seed, epoch)`
    over all n, so at any grad_accum A the ranks' step s together holds the single process's step s at grad_accum
    W*A. Only full global batches are shared out: the last n mod (W*b) examples of the epoch's order are dropped."""
    examples_of = examples if callable(examples) else (lambda _epoch: examples)

    def for_epoch(epoch: int) -> list[T]:
        everything = examples_of(epoch)
        per_rank = len(everything) // (world_size * batch_size)  # micro-batches per rank: full global batches only
        if per_rank == 0:
            raise ValueError(f"{len(everything)} examples do not fill one global batch of {world_size} x {batch_size}")
        everyone = seeded_batches(len(everything), batch_size, seed, epoch)
        mine = [i for j in range(per_rank) for i in everyone[j * world_size + rank]]
        # The trainer visits shard position slots[k] k-th: put the k-th example of this rank's batches there.
        slots = [i for batch in seeded_batches(len(mine), batch_size, seed, epoch) for i in batch]
        shard: list[T] = [None] * len(mine)  # type: ignore[list-item]
        for slot, index in zip(slots, mine):
            shard[slot] = everything[index]
        return shard

    return for_epoch


def average_gradients(model: torch.nn.Module, group: dist.ProcessGroup | None = None) -> list:
    """DDP's gradient averaging: after backward accumulates a parameter's gradient, all-reduce it (sum, then divide
    by the world size: gloo has no AVG) so every rank holds the mean over ranks. With grad_accum > 1 the running
    sum is averaged after each micro-batch; averaging is linear and leaves equal values as they are, so the result
    is the mean of the sums. Returns the hook handles (`handle.remove()` undoes it)."""
    world_size = dist.get_world_size(group)

    def average(param: torch.Tensor) -> None:
        dist.all_reduce(param.grad, op=dist.ReduceOp.SUM, group=group)
        param.grad.div_(world_size)

    return [p.register_post_accumulate_grad_hook(average) for p in model.parameters() if p.requires_grad]


def train_causal_lm_distributed(
    model: torch.nn.Module,
    tokenizer,
    examples: Examples,
    *,
    batch_size: int,
    seed: int = 0,
    device: str | torch.device = "cpu",
    checkpoint_dir: Path | None = None,
    resume_dir: Path | None = None,
    on_log: Callable[[dict], None] | None = None,
    on_eval: Callable[[dict], None] | None = None,
    fingerprint_extra: dict | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """`train_causal_lm` on every rank of a torchrun launch (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT in the
    environment): `device` "cuda" trains on cuda:LOCAL_RANK over nccl, "cpu" over gloo. Every rank must be given
    the same model, examples and settings; `batch_size` is per rank (global batch = world size x batch_size).

    Rank 0 alone saves `checkpoint_dir` and calls `on_log` / `on_eval`; each rank keeps its resumable state in
    `resume_dir/rank{r}`. The result is `train_causal_lm`'s with "history" (its "train_loss"), "final_train_loss",
    "tokens" and "log" over all ranks (per-step mean loss, summed tokens and throughput), this rank's own per-step
    losses and tokens as "rank_losses" / "rank_tokens", and
    "rank", "world_size". The process group is destroyed before returning."""
    device = _join(device)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
        _require_same_data(examples, settings.get("validation"))
        model.to(device)
        _broadcast_from_rank0(model)
        hooks = average_gradients(model)
        rank_dir = Path(resume_dir) / f"rank{rank}" if resume_dir is not None else None
        _require_same_resume_step(rank_dir)
        result = train_causal_lm(
            model, tokenizer, rank_examples(examples, batch_size, seed, rank, world_size), batch_size=batch_size,
            seed=seed, device=device, checkpoint_dir=checkpoint_dir if rank == 0 else None, resume_dir=rank_dir,
            on_log=_global_log(on_log if rank == 0 else None, device),
            on_eval=_same_checkpoint(on_eval if rank == 0 else None),
            fingerprint_extra={**(fingerprint_extra or {}), "rank": rank, "world_size": world_size},
            length_grouped=False, **settings)
        for hook in hooks:
            hook.remove()
        mine = [h["train_loss"] for h in result["history"]]
        losses = [x / world_size for x in _all_sum(mine, device)]
        result.update(rank_losses=mine, history=[h | {"train_loss": x} for h, x in zip(result["history"], losses)],
                      final_train_loss=losses[-1] if losses else None,
                      rank_tokens=result["tokens"], tokens=int(_all_sum([result["tokens"]], device)[0]),
                      log=[_global_record(r, device) for r in result["log"]],  # a resumed run's too
                      rank=rank, world_size=world_size)
        result["timing"] |= {"tokens_per_s": result["tokens"] / max(result["timing"]["wall_s"], 1e-9)}
        if rank == 0 and resume_dir is not None:
            resume.remove(resume_dir)  # the per-rank folders are gone (after the all-reduce above): drop their parent
        return result
    finally:
        dist.destroy_process_group()


def _join(device: str | torch.device) -> torch.device:
    """Join torchrun's process group (env:// rendezvous); this rank's device."""
    if torch.device(device).type == "cuda":
        local = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=local)
        return local
    dist.init_process_group("gloo")
    return torch.device("cpu")


def _all_sum(values: Sequence[float], device: torch.device) -> list[float]:
    """Element-wise sum over ranks (float64, on the device the backend reduces on)."""
    t = torch.tensor(list(values), dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def _gather(value: Any) -> list:
    """Every rank's `value` (any picklable object), in rank order."""
    values: list = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def _require_same_data(examples: Examples, validation: Sequence | None) -> None:
    """Ranks that were handed different data would train on a mix of both: refuse before the first step."""
    first = examples(0) if callable(examples) else examples
    mine = resume.fingerprint(data=[(e.prompt, e.target, e.kind) for e in first],
                              validation=[(e.prompt, e.target, e.kind) for e in validation or []])
    if len(set(_gather(mine))) > 1:
        raise RuntimeError("the ranks were given different training or validation examples")


def _broadcast_from_rank0(model: torch.nn.Module) -> None:
    """Rank 0's weights and buffers on every rank: a seed alone would not cover a weight loaded or initialised
    differently on one rank."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            dist.broadcast(tensor, src=0)


def _require_same_resume_step(rank_dir: Path | None) -> None:
    """A kill between two ranks' state writes leaves them at different steps; resumed, they would step out of
    line (and wait on each other forever at the end). Refuse by name instead."""
    state = resume.state_path(rank_dir) if rank_dir is not None else None
    step = 0
    if state is not None and state.exists():  # mmap: read the step, not the gigabytes of weights beside it
        step = torch.load(state, map_location="cpu", weights_only=True, mmap=True)["trainer"]["step"]
    steps = _gather(step)
    if len(set(steps)) > 1:
        raise RuntimeError(f"the ranks' resumable states are at different steps {steps}; delete "
                           f"{rank_dir.parent} to start over")


def _global_record(record: dict, device: torch.device) -> dict:
    """A log record of every rank (all log at the same steps) as the run's: the loss averaged over the ranks'
    equal micro-batch counts, the throughput summed."""
    loss, tokens_per_s, examples_per_s = _all_sum(
        [record["train_loss"], record["tokens_per_s"], record["examples_per_s"]], device)
    return {**record, "train_loss": loss / dist.get_world_size(), "tokens_per_s": tokens_per_s,
            "examples_per_s": examples_per_s}


def _global_log(on_log: Callable[[dict], None] | None, device: torch.device) -> Callable[[dict], None]:
    """Every rank takes part in each record's reduction; `on_log` (rank 0's) gets the run's record."""

    def log(record: dict) -> None:
        total = _global_record(record, device)
        if on_log is not None:
            on_log(total)

    return log


def _same_checkpoint(on_eval: Callable[[dict], None] | None) -> Callable[[dict], None]:
    """Identical weights give identical validation losses, hence identical checkpoint and early-stopping choices;
    should a kernel ever differ across devices, a rank would stop alone and the rest wait forever. Compare the
    choice at every evaluation and fail instead."""

    def check(record: dict) -> None:
        best = _gather(record["best_step"])
        if len(set(best)) > 1:
            raise RuntimeError(f"ranks chose different best steps {best} at step {record['step']} "
                               f"(validation losses differ across devices)")
        if on_eval is not None:
            on_eval(record)

    return check
