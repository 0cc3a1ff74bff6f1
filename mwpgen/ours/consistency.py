"""Equation consistency L_eq (paper Eq. 4) through a Gumbel-softmax relaxation (supplementary A).

The generated problem M' is relaxed token by token: at every problem position t the generator's
pre-softmax activations f_{Theta,t} become a soft one-hot vector

    m'_t = softmax((f_{Theta,t} + g_t) / tau),   g_t = -log(-log u),  u ~ Uniform(0, 1)   ("gumbel")
    m'_t = softmax(f_{Theta,t} / tau)                                                     ("softmax")

(the latter is the ablation's deterministic relaxation). Soft vectors times the mwp2eq model's input
embedding matrix are its input embeddings for the problem part of the mwp2eq prompt
"problem: <M'> equation:", and mwp2eq's NLL of the input equation E (Eq. 4) is back-propagated
through the relaxation into Theta.

Where f_{Theta,t} comes from (train.ours.equation_text):
- "free" (default, the paper's M' ~ p_Theta, as RelGAN samples): `free_running_problems` writes M' token by
  token from the generator's prompt, each token fed back as the next input, so f_{Theta,t} is conditioned on
  what the generator itself wrote. The relaxed token is straight-through: the forward value is the hard one-hot
  of the written token (with Gumbel noise an exact sample of p_Theta; with "softmax" the greedy token), the
  backward value is m'_t's gradient. So mwp2eq reads a real token sequence, what it meets at test time, while the
  gradient of L_eq reaches every f_{Theta,t}. A soft mixture fed forward would be an input neither model ever
  saw. The writing itself runs without a graph and M' is then scored in one pass (the function's docstring says
  why and what that leaves out).
- "teacher_forced": the logits of the L_LM pass (position t conditioned on the REFERENCE m_<t): one pass
  instead of T sequential ones, but M' is then the reference problem plus noise, so L_eq never sees what the
  generator writes when it runs free.
The relaxation requires generator and mwp2eq to share one vocabulary (`check_shared_vocabulary`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F

from mwpgen.lm.prompts import IGNORE_INDEX, MWP2EQ_PREFIX, MWP2EQ_SUFFIX, encode_prompt

RELAXATIONS = ("gumbel", "softmax")


def gumbel_noise(shape, device=None, generator: torch.Generator | None = None, eps: float = 1e-10) -> torch.Tensor:
    """i.i.d. standard Gumbel samples g = -log(-log(u)), u ~ Uniform(0, 1) (supplementary A)."""
    u = torch.rand(shape, device=device, generator=generator).clamp(eps, 1.0 - eps)
    return -torch.log(-torch.log(u))


def relax(logits: torch.Tensor, tau: float = 1.0, relaxation: str = "gumbel",
          generator: torch.Generator | None = None) -> torch.Tensor:
    """Soft one-hot vectors m'_t [..., V] from pre-softmax activations f [..., V], computed in fp32."""
    if relaxation not in RELAXATIONS:
        raise ValueError(f"relaxation must be one of {RELAXATIONS}, got {relaxation!r}")
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    f = logits.float()
    if relaxation == "gumbel":
        f = f + gumbel_noise(f.shape, f.device, generator)
    return torch.softmax(f / tau, dim=-1)


def _vocab_by_id(tokenizer) -> list[str | None]:
    vocab = tokenizer.get_vocab()
    out: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
    for tok, i in vocab.items():
        out[i] = tok
    return out


def check_shared_vocabulary(gen_tokenizer, mwp2eq_tokenizer, gen_model=None, mwp2eq_model=None) -> None:
    """Raise ValueError unless generator and mwp2eq share one vocabulary (token <-> id) and, when the
    models are given, the generator's output size equals the mwp2eq's input-embedding rows."""
    g, p = _vocab_by_id(gen_tokenizer), _vocab_by_id(mwp2eq_tokenizer)
    if g != p:
        at = lambda xs, k: xs[k] if k < len(xs) else None  # noqa: E731 — a one-line local helper
        i = next(k for k in range(max(len(g), len(p))) if at(g, k) != at(p, k))
        gt, pt = at(g, i), at(p, i)
        raise ValueError(
            "generator and mwp2eq tokenizers must share one vocabulary for the Gumbel-softmax relaxation "
            f"(Eq. 4): generator vocabulary size {len(gen_tokenizer.get_vocab())}, mwp2eq vocabulary size "
            f"{len(mwp2eq_tokenizer.get_vocab())}; first differing token at id {i}: generator {gt!r} vs mwp2eq {pt!r}")
    if gen_model is not None and mwp2eq_model is not None:
        n_out = gen_model.get_output_embeddings().weight.shape[0]
        n_in = mwp2eq_model.get_input_embeddings().weight.shape[0]
        if n_out != n_in:
            raise ValueError(f"generator output vocabulary size {n_out} != mwp2eq input embedding vocabulary "
                             f"size {n_in}: the soft tokens m'_t cannot be embedded by mwp2eq")


@contextlib.contextmanager
def frozen(module: torch.nn.Module) -> Iterator[None]:
    """Parameters do not require grad inside the block (gradients still flow THROUGH the module to its
    inputs): L_eq trains Theta, not Phi, unless the caller wants otherwise."""
    flags = [p.requires_grad for p in module.parameters()]
    for p in module.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(module.parameters(), flags):
            p.requires_grad_(flag)


def mwp2eq_pieces(tokenizer, equation: str) -> tuple[list[int], list[int], list[int]]:
    """Token ids around the problem in prompts.py's mwp2eq example "problem: <M> equation: <E><EOS>":
    (prefix with special tokens, suffix " equation:", target " E" + EOS)."""
    prefix = encode_prompt(tokenizer, MWP2EQ_PREFIX.rstrip())
    suffix = list(tokenizer(MWP2EQ_SUFFIX, add_special_tokens=False)["input_ids"])
    target = list(tokenizer(" " + equation, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
    return prefix, suffix, target


def soft_mwp2eq_nll(mwp2eq, soft_problems: Sequence[torch.Tensor], pieces: Sequence[tuple[list, list, list]],
                    autocast_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, int]:
    """Sum over the batch of Eq. 4, -sum_t log p_Phi(e_t | M', e_<t), and the number of equation tokens.

    soft_problems[i]: [T_i, V] soft one-hot problem tokens; pieces[i]: `mwp2eq_pieces` of example i.
    Rows are built per example (prefix | M' E_Phi | suffix | E + EOS) and right-padded."""
    emb = mwp2eq.get_input_embeddings()
    device = emb.weight.device
    rows, label_rows = [], []
    for soft, (prefix, suffix, target) in zip(soft_problems, pieces):
        ids = lambda xs: torch.tensor(xs, dtype=torch.long, device=device)  # noqa: E731 — a one-line local helper
        soft_emb = soft.to(emb.weight.dtype) @ emb.weight  # [T, D]: m'_t times the embedding matrix
        rows.append(torch.cat([emb(ids(prefix)), soft_emb, emb(ids(suffix)), emb(ids(target))]))
        n_prompt = len(prefix) + soft.shape[0] + len(suffix)
        label_rows.append(ids([IGNORE_INDEX] * n_prompt + target))
    width = max(r.shape[0] for r in rows)
    embeds = torch.zeros(len(rows), width, rows[0].shape[1], dtype=rows[0].dtype, device=device)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, (r, lab) in enumerate(zip(rows, label_rows)):
        embeds[i, : r.shape[0]], labels[i, : r.shape[0]], mask[i, : r.shape[0]] = r, lab, 1
    with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
        logits = mwp2eq(inputs_embeds=embeds, attention_mask=mask).logits
    shift_logits, shift_labels = logits[:, :-1].float(), labels[:, 1:]
    nll = F.cross_entropy(shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1),
                          ignore_index=IGNORE_INDEX, reduction="sum")
    return nll, int((shift_labels != IGNORE_INDEX).sum())


def teacher_forced_problems(problem_logits: Sequence[torch.Tensor], tau: float, relaxation: str,
                            generator: torch.Generator | None = None) -> list[torch.Tensor]:
    """M' from the teacher-forced logits: problem_logits[i] [T_i, V] predict reference problem i's tokens."""
    return [relax(f, tau, relaxation, generator) for f in problem_logits]


def free_running_problems(model, prompts: Sequence[torch.Tensor], eos_id: int, max_tokens: int, *, tau: float,
                          relaxation: str, autocast_dtype: torch.dtype | None = None,
                          feedback_gradient: bool = False) -> list[torch.Tensor]:
    """M' written by the generator itself: from prompt i's input embeddings [P_i, D], up to `max_tokens` tokens, each
    drawn from the relaxation (Gumbel-max: an exact sample of p_Theta; softmax: the greedy token) and fed back as
    the next input. Returns the straight-through relaxed tokens [T_i, V] per prompt, those before the row's first
    EOS (at least one): forward the written token's one-hot, backward the relaxation of the logits that chose it.

    The tokens are written without a graph (a KV-cached decoding) and then scored in ONE teacher-forced pass over
    prompt + M', whose logits at each position are conditioned on what the generator wrote before it: L_eq's
    gradient reaches every f_{Theta,t}, but not through the fed-back inputs of the later steps.
    `feedback_gradient` keeps that path too (every step in the graph): measured in benchmarks/bench_joint_step.py at
    several times the cost of the whole step, for a gradient that straight-through only approximates anyway."""
    from mwpgen.ours.inputs import pad_rows

    emb = model.get_input_embeddings()
    x, mask = pad_rows(prompts, left=True)  # every row's next token in the last column
    position = (mask.cumsum(-1) - 1).clamp(min=0)
    cache, steps, tokens = None, [], []
    done = torch.zeros(len(prompts), dtype=torch.bool, device=x.device)
    length = torch.full((len(prompts),), max_tokens, dtype=torch.long, device=x.device)
    with torch.autocast(x.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None), \
            contextlib.nullcontext() if feedback_gradient else torch.no_grad():
        for t in range(max_tokens):
            out = model(inputs_embeds=x, attention_mask=mask, position_ids=position, cache=cache, use_cache=True,
                        logits_to_keep=1)
            cache = out.cache
            soft = relax(out.logits[:, -1], tau, relaxation)
            token = soft.argmax(-1)
            tokens.append(token)
            if feedback_gradient:
                hard = torch.nn.functional.one_hot(token, soft.shape[-1]).to(soft.dtype)
                steps.append(hard + soft - soft.detach())  # forward: the token; backward: the relaxation's gradient
            ended = (token == eos_id) & ~done
            length[ended] = t
            done |= ended
            if bool(done.all()):
                break
            x = (steps[-1].to(emb.weight.dtype) @ emb.weight)[:, None] if feedback_gradient else emb(token)[:, None]
            mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], dim=1)
            position = position[:, -1:] + 1
    if not feedback_gradient:
        written = torch.stack(tokens, dim=1)  # [B, T]
        x, mask = pad_rows(prompts, left=True)
        x = torch.cat([x, emb(written)], dim=1)
        mask = torch.cat([mask, mask.new_ones(written.shape)], dim=1)
        position = (mask.cumsum(-1) - 1).clamp(min=0)
        n = written.shape[1]
        with torch.autocast(x.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(inputs_embeds=x, attention_mask=mask, position_ids=position, logits_to_keep=n + 1).logits
        soft = relax(logits[:, :-1], tau, relaxation)  # position P - 1 + t predicts written token t
        hard = torch.nn.functional.one_hot(written, soft.shape[-1]).to(soft.dtype)
        steps = list((hard + soft - soft.detach()).unbind(1))
    stacked = torch.stack(steps, dim=1)  # [B, T, V]
    return [stacked[i, : max(int(n), 1)] for i, n in enumerate(length)]


def equation_consistency_loss(mwp2eq, tokenizer, soft_problems: Sequence[torch.Tensor], equations: Sequence[str], *,
                              train_mwp2eq: bool = False,
                              autocast_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, int]:
    """L_eq (Eq. 4) summed over the batch, and its token count. soft_problems[i]: [T_i, V] relaxed problem M'
    (`free_running_problems` or `teacher_forced_problems`); equations[i]: its input equation E. With
    train_mwp2eq=False mwp2eq's parameters get no gradient from L_eq (only Theta does)."""
    pieces = [mwp2eq_pieces(tokenizer, e) for e in equations]
    with contextlib.nullcontext() if train_mwp2eq else frozen(mwp2eq):
        return soft_mwp2eq_nll(mwp2eq, soft_problems, pieces, autocast_dtype)
