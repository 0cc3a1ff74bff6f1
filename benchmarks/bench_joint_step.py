"""Cost of one joint training step of "ours" vs one plain LM fine-tuning step, side by side.

    python -m benchmarks.bench_joint_step --model tiny --steps 3
    python -m benchmarks.bench_joint_step --model smollm2-135m --steps 5 --batch 8 --seq 128

Arms (same generator, batch and generator sequence length; timed interleaved A B C A B C ... so that
load drift on a shared machine hits all arms alike, median reported; one warm-up step each is not
timed; memory is measured in one extra untimed step per arm):
  plain   L_LM step of the generator on the text prompt "equation: E context: <all candidate words>
          problem: M" (what train_lm does: forward, lm_loss, backward, clip, Adam step)
  phase1  joint step 1: selector q_Psi + straight-through c + generator, L_LM + beta L_c
  phase2  joint step 2 as trained by default (equation_text = free): frozen selector forward + generator
          (L_LM) + the generator writing M' token by token (Gumbel-max, fed back, no graph; at most
          free_run_tokens = the problem's length here) and one pass scoring it (straight-through Gumbel-softmax)
          + mwp2eq on M' (L_eq) + mwp2eq on the real problem (its own NLL), two Adam steps
  phase2-feedback-gradient  phase2 with the gradient kept through every fed-back input of the writing (every
          step of it in the graph; consistency.free_running_problems(feedback_gradient=True))
  phase2-teacher-forced  the same with M' relaxed from the L_LM pass's logits (equation_text = teacher_forced:
          no writing)
  phase2-one-pass  phase2 without the pass on the real problem: L_eq trains mwp2eq too
          (train.ours.mwp2eq_phase2 = generated; L_eq's gradient to the generator is unchanged)
The plain prompt lists every candidate word; the joint prompt has the fixed-width slot (context_tokens), so the
two generator sequences differ a little in length (printed).

Peak memory per step. CUDA: torch.cuda.max_memory_allocated() after reset_peak_memory_stats(),
minus memory_allocated() before the step (activations, gradients, temporaries; weights and Adam
state were allocated in the warm-up). CPU: a thread samples the process RSS (/proc/self/statm)
every 0.2 ms during the step; peak minus the RSS just before the step, after malloc_trim(0) so freed
heap is returned first. (tracemalloc does not see torch's allocator; getrusage's ru_maxrss is a
process-lifetime high-water mark that cannot be reset between arms.) CPU numbers are approximate.

FLOPs per step, 6 x params x tokens for each pass that trains its weights (2 forward + 4 backward; the
written M' counts free_run_tokens per row, an upper bound when a row ends early);
4 x params x tokens for mwp2eq on the soft problem, whose weights are frozen for L_eq (forward +
input-gradient backward only); plus the relaxed embedding product m'_t E_Phi (V x D per soft token:
2 forward + 2 backward) and the selector's attention (2 x 2 B T^2 D forward). "params" are matmul
weights: an untied input embedding (a lookup) is left out, a tied one counts once (the LM head).
Attention score FLOPs are ignored. Tokens are the non-padding tokens of each pass. The achieved
FLOP rate is compared with a dense matmul (n x n, training dtype) measured in the same run.

Limits. Each step kind's time is also given as a multiple of its memory-bound time: the bytes it must move at
least (each trained model's weights read in forward and backward in the training dtype, and Adam's 28 bytes a
parameter) at a memory-copy rate measured in the same run. The writer of M' (`free_running_problems`, phase 2's
token-by-token part) is timed alone: ms per token at the batch against its limit, the slower of one decoding step's
FLOPs at the matmul rate and its weights read once at the copy rate. Padding's share of the tokens a training epoch
computes is benchmarks/bench_length_grouping.py's (real problems, plain and length-grouped batches). The first line
names the CPU (model, native bf16 or not) every figure was measured on.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch

from benchmarks.flops import matmul_params, matmul_rate, memory_rate, timed
from benchmarks.machine import describe
from mwpgen.config.schema import OursTrainParams
from mwpgen.device import autocast_dtype
from mwpgen.lm.loading import DEFAULT_MODEL, DEFAULT_MODEL_CACHE, load_model_and_tokenizer
from mwpgen.lm.prompts import collate, encode_example, generator_example, mwp2eq_example
from mwpgen.lm.training import lm_loss
from mwpgen.ours.consistency import free_running_problems
from mwpgen.ours.inputs import JointExample, encode_joint, prompt_embeddings
from mwpgen.ours.joint_step import JointModels, joint_step, make_optimizers
from mwpgen.ours.selector import ContextSelector
from tests.helpers.tiny_model import tiny_model_dir

EQUATION = "x = ( num1 - num2 ) - num3"
SENTENCE = ("Joan found num1 seashells on the beach . She gave num2 of them to Tom and num3 to her sister . "
            "How many seashells does Joan have left ?").split()


def build_problem(tok, seq: int) -> str:
    """Cycle SENTENCE until the joint generator sequence would exceed `seq` tokens."""
    words: list[str] = []
    while True:
        longer = words + [SENTENCE[len(words) % len(SENTENCE)]]
        enc = encode_joint(tok, JointExample(EQUATION, " ".join(longer)))
        n = len(enc.prefix) + sum(e - s for s, e in enc.problem.heads) + len(enc.suffix) + len(enc.problem.ids) + 1
        if n > seq:
            return " ".join(words)
        words = longer


class RssPeak:
    """Peak resident set size (bytes) above the level at entry, sampled by a thread (CPU only)."""

    def __enter__(self):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except OSError:
            pass
        self.base = self.peak = self._rss()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()
        return self

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    def _watch(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.0002)

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self._rss())
        self.delta = self.peak - self.base


def peak_memory(fn, device: torch.device) -> int:
    """Peak extra bytes during one call (a separate, untimed call: the RSS sampler costs CPU time)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    with RssPeak() as rss:
        fn()
    return rss.delta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny", help="tiny, smollm2-135m, an HF id or a local path")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_MODEL_CACHE)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per arm (after one warm-up)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128, help="generator sequence length (prompt + context + problem)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--no-amp", action="store_true", help="fp32 (default: the pipeline's autocast: bf16 on CUDA and on "
                    "CPUs with native bf16)")
    ap.add_argument("--arms", nargs="+", default=None, help="the arms to time (default: all; plain always)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default: 1 for tiny, whose ops are too small to split; else torch's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads or (1 if args.model == "tiny" else torch.get_num_threads()))
    torch.manual_seed(0)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    amp = autocast_dtype(device, mixed_precision=not args.no_amp)

    tmp = tempfile.TemporaryDirectory()
    if args.model == "tiny":
        corpus = [" ".join(SENTENCE), generator_example(EQUATION, SENTENCE, " ".join(SENTENCE)).prompt,
                  mwp2eq_example(" ".join(SENTENCE), EQUATION).prompt + " " + EQUATION]
        spec = str(tiny_model_dir(Path(tmp.name) / "tiny", corpus))
    else:
        spec = DEFAULT_MODEL if args.model == "smollm2-135m" else args.model
    gen, tok = load_model_and_tokenizer(spec, args.cache_dir, device=device)
    mwp2eq, ptok = load_model_and_tokenizer(spec, args.cache_dir, device=device)
    models = JointModels(gen, mwp2eq, tok, ContextSelector.from_model(gen).to(device), amp)
    models.check(ptok)

    problem = build_problem(tok, args.seq)
    examples = [JointExample(EQUATION, problem)] * args.batch
    enc = encode_joint(tok, examples[0])
    words = [enc.problem.words[enc.problem.word_of[s]] for s, _ in enc.problem.heads]
    plain = collate([encode_example(tok, generator_example(EQUATION, words, problem), 10**6)] * args.batch,
                    tok.pad_token_id)
    plain = {k: v.to(device) for k, v in plain.items()}
    real_mwp2eq = encode_example(tok, mwp2eq_example(problem, EQUATION), 10**6)
    # no truncation at these lengths; M' at most as long as the reference problem
    cfg = OursTrainParams(max_problem_tokens=2048, max_length=2048, free_run_tokens=len(enc.problem.ids))
    joint_opts = make_optimizers(models, lr=cfg.lr, selector_lr=0.0)
    plain_opt = torch.optim.AdamW(gen.parameters(), lr=5e-5, weight_decay=0.0)

    def plain_step():
        gen.train()
        with torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            logits = gen(input_ids=plain["input_ids"], attention_mask=plain["attention_mask"]).logits
            loss = lm_loss(logits, plain["labels"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)
        plain_opt.step()
        plain_opt.zero_grad(set_to_none=True)

    one_pass = cfg.model_copy(update={"mwp2eq_phase2": "generated"})
    teacher_forced = cfg.model_copy(update={"equation_text": "teacher_forced"})
    dropout = 0.3  # keywords.dropout
    def with_feedback_gradient():
        """phase2 with the gradient through every fed-back input kept (consistency.free_running_problems)."""
        import mwpgen.ours.joint_step as joint_step_module

        plain_write = joint_step_module.free_running_problems
        joint_step_module.free_running_problems = functools.partial(plain_write, feedback_gradient=True)
        try:
            return joint_step(2, models, examples, joint_opts, cfg, dropout)
        finally:
            joint_step_module.free_running_problems = plain_write

    arms = {"plain": plain_step, "phase1": lambda: joint_step(1, models, examples, joint_opts, cfg, dropout),
            "phase2": lambda: joint_step(2, models, examples, joint_opts, cfg, dropout),
            "phase2-feedback-gradient": with_feedback_gradient,
            "phase2-teacher-forced": lambda: joint_step(2, models, examples, joint_opts, teacher_forced, dropout),
            "phase2-one-pass": lambda: joint_step(2, models, examples, joint_opts, one_pass, dropout)}
    if args.arms:
        unknown = sorted(set(args.arms) - set(arms))
        if unknown:
            ap.error(f"--arms: no arm {', '.join(unknown)} (the arms: {', '.join(arms)})")
        arms = {name: fn for name, fn in arms.items() if name == "plain" or name in args.arms}

    # FLOPs per step (module docstring).
    n_gen, n_par = matmul_params(gen), matmul_params(mwp2eq)
    vocab, d_par, d_sel = mwp2eq.get_input_embeddings().weight.shape + (models.selector.embeddings.shape[1],)
    d_gen = gen.get_input_embeddings().weight.shape[1]
    t_gen = int(plain["attention_mask"].sum())  # the joint sequence differs by the slot's width (printed)
    t_prob = args.batch * len(enc.problem.ids)
    t_par = args.batch * len(real_mwp2eq["input_ids"])  # soft and real mwp2eq inputs have the same layout
    sel = 2 * 2 * args.batch * len(enc.problem.ids) ** 2 * d_sel
    written = 6 * n_gen * t_prob + 4 * t_prob * vocab * d_gen  # M' written (trained) and each token fed back
    tf = 6 * n_gen * t_gen + sel + 4 * n_par * t_par + 4 * t_prob * vocab * d_par + 6 * n_par * t_par
    flops = {"plain": 6 * n_gen * t_gen, "phase1": 6 * n_gen * t_gen + sel, "phase2": tf + written,
             "phase2-teacher-forced": tf, "phase2-feedback-gradient": tf + written,
             "phase2-one-pass": 6 * n_gen * t_gen + sel + 6 * n_par * t_par + 4 * t_prob * vocab * d_par + written}

    print(f"model {args.model}: generator {sum(p.numel() for p in gen.parameters()) / 1e6:.2f}M params, "
          f"mwp2eq the same; device {device}{' bf16 autocast' if amp else ' fp32'}; threads {torch.get_num_threads()}")
    joint_len = len(enc.prefix) + cfg.context_tokens + len(enc.suffix) + len(enc.problem.ids)
    joint_len += 1  # EOS
    print(f"batch {args.batch}; generator seq: joint {joint_len} / plain {plain['input_ids'].shape[1]} tokens; "
          f"problem {len(enc.problem.ids)} tokens, {len(words)} candidate words; "
          f"mwp2eq seq {len(real_mwp2eq['input_ids'])}")
    n_mm = 8192 if device.type == "cuda" else 1024

    def reference() -> tuple[float, float]:
        return (matmul_rate(device, amp or torch.float32, n_mm, reps=10 if device.type == "cuda" else 5),
                memory_rate(device))

    before = reference()  # also after the arms: the rates a loaded process measures can be half the machine's
    # The writer first: after the arms (8 GB of activations for the feedback-gradient one) this process measured
    # the dense matmul at two thirds of its rate before them.
    writer = writer_timing(models, examples, cfg, device, args.steps)
    for fn in arms.values():  # warm-up: allocator, Adam state, kernels
        fn()
    times = {k: [] for k in arms}
    for _ in range(args.steps):
        for name, fn in arms.items():
            times[name].append(timed(fn, device))
    mems = {name: peak_memory(fn, device) for name, fn in arms.items()}
    after = reference()
    peak, bandwidth = max(before[0], after[0]), max(before[1], after[1])  # the machine's, not a slow moment's
    print(f"machine: {describe()}")
    print(f"dense matmul {n_mm}x{n_mm} {amp or torch.float32}: {peak / 1e9:.1f} GFLOP/s; "
          f"memory copy {bandwidth / 1e9:.1f} GB/s (the higher of before the arms: {before[0] / 1e9:.1f}, "
          f"{before[1] / 1e9:.1f}; after: {after[0] / 1e9:.1f}, {after[1] / 1e9:.1f})")
    # Memory-bound time of a training step: the weights read in forward and backward (in the autocast dtype) and
    # Adam's traffic (fp32 param, grad, m, v read; param, m, v written: 28 bytes a parameter), per trained model.
    weight_bytes = 2 if amp is not None else 4
    n_all = sum(p.numel() for p in gen.parameters())
    step_bytes = n_all * (2 * weight_bytes + 28)
    trained_models = {"plain": 1, "phase1": 1, "phase2": 2, "phase2-feedback-gradient": 2,
                      "phase2-teacher-forced": 2, "phase2-one-pass": 2}
    mem_kind = "peak alloc" if device.type == "cuda" else "peak RSS delta"
    base_t, base_m = statistics.median(times["plain"]), mems["plain"]
    for name in arms:
        t, m = statistics.median(times[name]), mems[name]
        rate = flops[name] / t
        memory_bound = trained_models[name] * step_bytes / bandwidth
        print(f"{name:>21}: {t * 1e3:9.1f} ms/step (x{t / base_t:.2f})  {mem_kind} {m / 2**20:8.1f} MiB "
              f"(x{m / max(base_m, 1):.2f})  {flops[name] / 1e9:8.2f} GFLOP/step  {rate / 1e9:7.2f} GFLOP/s "
              f"= {rate / peak:.1%} of matmul, x{t / memory_bound:.1f} its memory-bound time "
              f"[steps ms: {', '.join(f'{x * 1e3:.0f}' for x in times[name])}]")
    writer_limits(models, writer, peak, bandwidth)


def writer_timing(models: JointModels, examples, cfg: OursTrainParams, device, steps: int) -> tuple[float, int, int]:
    """The writer of M' alone (consistency.free_running_problems, the phase-2 step's token-by-token part, without
    the scoring pass' backward): (seconds per written token at the batch, tokens, batch)."""
    gen = models.generator
    emb = gen.get_input_embeddings()
    encoded = [encode_joint(models.tokenizer, ex, cfg.max_problem_tokens) for ex in examples]
    with torch.no_grad():
        prompts = [prompt_embeddings(emb, e, cfg.context_tokens) for e in encoded]
    n = cfg.free_run_tokens

    def write():
        free_running_problems(gen, prompts, eos_id=-1, max_tokens=n, tau=cfg.tau, relaxation=cfg.relaxation,
                              autocast_dtype=models.amp_dtype)  # eos_id -1: every row writes all n tokens

    write()
    return statistics.median(timed(write, device) for _ in range(steps)) / n, n, len(prompts)


def writer_limits(models: JointModels, writer: tuple[float, int, int], peak: float, bandwidth: float) -> None:
    """The writer's ms per token against its limit, the slower of one decoding step's FLOPs at the matmul rate
    (2 x matmul params x batch) and its weights read once at the copy rate."""
    per_token, n, batch = writer
    gen = models.generator
    n_mm = matmul_params(gen)
    weight_bytes = n_mm * (2 if models.amp_dtype is not None else 4)
    limit = max(2 * n_mm * batch / peak, weight_bytes / bandwidth)
    print(f"{'writer':>21}: {per_token * 1e3:9.1f} ms/token at batch {batch} ({n} tokens, scoring pass "
          f"included; timed before the arms) = x{per_token / limit:.1f} its limit of {limit * 1e3:.1f} ms/token "
          f"(FLOPs {2 * n_mm * batch / peak * 1e3:.1f} ms, weights {weight_bytes / bandwidth * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
