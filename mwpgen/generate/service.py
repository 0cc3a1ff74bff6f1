"""A trained ours answering generation requests (mwpgen.generate.request): the one code path behind `mwpgen
generate`, the MLflow model (tracking/pyfunc_model.py) and studies/verify_k/.

For a request it
1. builds the generator's prompt exactly as training and the generate stage do (mwpgen.ours.inputs.prompt_embeddings):
   the equation, then the context slot of the bundle's `context_tokens` embeddings (the user's keywords, every word
   kept as the selector's picks are, then zero vectors), then " problem:";
2. decodes `max(n, verify)` candidates (seeded; top-p sampling for several);
3. judges each candidate (only with `verify = K`: without it nothing is checked and no verdict is shown):
   - with a learned judge (mwpgen/judge/model.py, the train_judge stage's models/judge/<dataset>/fold<k>): its
     probability p that the problem encodes the equation; verified when p reaches the threshold of the equation's
     shape (chosen for precision on readings of validation equations of that shape, mwpgen/judge/verified.py; a
     shape that reached it at no threshold is never verified), and where the judge is gated by the rule
     (judge.json's gated_by_rule), when the rule below accepts it too;
   - without one, the rule the evaluate stage applied before (mwpgen.judge.judged) with the bundle's co-trained
     mwp2eq as its parser: verified when the greedy parse is the input equation symbol for symbol and the problem
     passes a reader's surface checks (every numN of the equation once, no other, a question at the end, and for
     each operator of the equation a word that commonly signals it: mwpgen.judge.OPERATION_CUES);
4. with `verify = K`, ranks the candidates by the judge and returns the best n (unverified ones only when fewer
   than n passed, and marked so; where none of the shown is verified, each says why in `verified_note`): by p,
   highest first, with a learned judge; else the verified ones first, each group by the parser's log-likelihood of
   the input equation per token (how firmly it reads that equation). A gated judge ranks those the rule accepts
   first, each group by p (so the rule reads the candidates in order of p and stops once n are accepted: the rest
   cannot be shown). Without `verify`, the n samples in order;
5. scores each shown problem by the generator's mean token log-likelihood of the text and its EOS, teacher-forced
   as in training (one forward pass; decoding scores would be those of the warped top-p distribution);
6. fills the numbers back in (given, drawn by `numbers = auto`, or seeded ones for distractor tokens) and computes
   the answer from the input equation.
The co-trained mwp2eq and the learned judge only choose what is shown here; the independent evaluator alone scores
ACC-eq.

A caller that must answer within a time (the served model: its request timeout) passes a `deadline`
(time.monotonic()); decoding stops at the first token step past it and DeadlineExceeded is raised between the
steps above and between the co-trained mwp2eq's batches of candidates (parse, equation_firmness), so work nobody
waits for any more is abandoned rather than finished.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import DynamicCache, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from mwpgen.data.masking import number_value
from mwpgen.device import resolve_device
from mwpgen.generate.request import (
    Request,
    RequestError,
    auto_numbers,
    detokenize,
    evaluate,
    fill_numbers,
    format_number,
)
from mwpgen.generate.surface_constraint import SurfaceConstraint
from mwpgen.judge.model import LearnedJudge
from mwpgen.judge.rule import equation_logprobs, judged
from mwpgen.judge.verified import never_verified_reason
from mwpgen.lm.decoding import _generation_config, predict_equations
from mwpgen.lm.prompts import encode_prompt, mwp2eq_prompt
from mwpgen.ours.bundle import bundle_settings, load_bundle, load_mwp2eq
from mwpgen.ours.inputs import JointExample, encode_joint, pad_rows, prompt_embeddings

MWP2EQ_BATCH = 16  # candidates the co-trained mwp2eq reads at once (parse, equation_firmness)

class DeadlineExceeded(TimeoutError):
    """The request's deadline passed before its problems were ready; what was computed is dropped."""


class _PastDeadline(StoppingCriteria):
    """Stops decoding at the first step after the deadline (every row at once)."""

    def __init__(self, deadline: float):
        self.deadline = deadline

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), time.monotonic() > self.deadline, dtype=torch.bool,
                          device=input_ids.device)


class TopP(LogitsProcessor):
    """The temperature, then nucleus filtering as transformers' TopPLogitsWarper does it (a token is kept while the
    probability of the tokens more probable than it is below `top_p`; the most probable is always kept), found among
    each row's `k` most probable tokens: sorting the whole vocabulary (49,152 tokens, 32 rows) took a quarter of a
    sampling step on 2 cores. A row whose nucleus is not within its top `k` falls back to the full sort. Both in one
    processor because transformers applies a caller's processors before its own temperature."""

    def __init__(self, top_p: float, temperature: float = 1.0, k: int = 256):
        self.top_p, self.temperature, self.k = top_p, temperature, k

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if self.temperature != 1.0:
            scores = scores / self.temperature
        probs = scores.softmax(dim=-1)
        top, index = probs.topk(min(self.k, probs.shape[-1]), dim=-1)  # descending
        keep = torch.zeros_like(scores, dtype=torch.bool)
        keep.scatter_(1, index, (top.cumsum(-1) - top) < self.top_p)
        wide = top.sum(-1) < self.top_p  # the nucleus reaches past the top k
        if bool(wide.any()):
            full, order = probs[wide].sort(dim=-1, descending=True)
            kept = (full.cumsum(-1) - full) < self.top_p
            keep[wide] = torch.zeros_like(kept).scatter_(1, order, kept)
        return scores.masked_fill(~keep, -float("inf"))


def check_deadline(deadline: float | None, what: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded(f"the deadline passed {what}")


@dataclass
class Problem:
    """One generated problem, as every output format shows it."""
    request: int  # index of the request in its batch
    rank: int  # 1 = best
    equation: str  # the input equation, masked (what the model read)
    given: str  # the input equation as written
    context: str
    text: str  # numbers filled in (when known) and detokenised
    masked_text: str  # as the generator wrote it
    verified: bool | None  # the judge accepts it; None: not checked (verify = 0)
    parsed_equation: str | None  # the co-trained mwp2eq's reading of masked_text (the rule's parse; None otherwise)
    answer: str | None  # x for the numbers, None while the numbers are num tokens
    numbers: dict[str, str] = field(default_factory=dict)
    log_likelihood: float = 0.0  # mean per token (text + EOS) under the generator
    judge_probability: float | None = None  # the learned judge's p(it encodes the equation); None: no learned judge
    # the threshold p is verified at for the equation's shape (mwpgen/judge/verified.py); None: no learned judge, or
    # a shape it never verifies
    judge_threshold: float | None = None
    verified_note: str | None = None  # verify = K and no shown problem verified: why, in one sentence

    def record(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def bundle_folder(path: str | Path) -> Path:
    """The bundle inside `path`: a bundle itself (ours.json) or an MLflow model folder (MLmodel) holding one as its
    pyfunc artifact `bundle` (tracking/pyfunc_model.py)."""
    path = Path(path)
    if (path / "ours.json").exists():
        return path
    if (path / "MLmodel").exists():
        import yaml

        meta = yaml.safe_load((path / "MLmodel").read_text(encoding="utf-8")) or {}
        artifact = meta.get("flavors", {}).get("python_function", {}).get("artifacts", {}).get("bundle", {})
        if artifact.get("path") and (path / artifact["path"] / "ours.json").exists():
            return path / artifact["path"]
        raise FileNotFoundError(f"{path} is an MLflow model without an ours bundle (pyfunc artifact 'bundle')")
    if not path.exists():
        raise FileNotFoundError(f"no model at {path}")
    raise FileNotFoundError(f"{path} is not a trained ours model (no ours.json, no MLmodel)")


def packaged_judge(path: str | Path) -> Path | None:
    """The learned judge an MLflow model folder packages as its pyfunc artifact `judge` (tracking/pyfunc_model.py);
    None for a bundle folder or a model logged without one."""
    path = Path(path)
    if not (path / "MLmodel").exists():
        return None
    import yaml

    meta = yaml.safe_load((path / "MLmodel").read_text(encoding="utf-8")) or {}
    artifact = meta.get("flavors", {}).get("python_function", {}).get("artifacts", {}).get("judge", {})
    return path / artifact["path"] if artifact.get("path") else None


class Service:
    def __init__(self, generator, tokenizer, mwp2eq, settings: dict, judge: LearnedJudge | None = None):
        self.generator, self.tokenizer, self.mwp2eq, self.settings = generator, tokenizer, mwp2eq, settings
        self.judge = judge  # the learned judge; None: the rule with the co-trained mwp2eq
        self.device = next(generator.parameters()).device
        # sample only what passes the rule's surface checks (mwpgen/generate/surface_constraint.py): off until
        # studies/surface_constraint shows it pays
        self.surface_constraint = False

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", judge: str | Path | None = None) -> Service:
        """The bundle at `path` (mwpgen.generate.service.bundle_folder), with the learned judge saved in `judge`
        (None: verify by the rule)."""
        folder = bundle_folder(path)
        bundle_settings(folder)  # a clear error for a wrong format before loading weights
        device = resolve_device(device)
        generator, tokenizer, _selector, settings = load_bundle(folder, device)
        learned = LearnedJudge.load(judge, device) if judge is not None else None
        if learned is not None and not learned.info.verified:
            warnings.warn(f"{judge}: this judge was saved before \"verified\" was held to a precision per equation "
                          "shape (mwpgen/judge/verified.py): it verifies at its ranking threshold, chosen for recall, "
                          "not precision; run its train_judge stage again", stacklevel=2)
        return cls(generator, tokenizer, load_mwp2eq(folder, device), settings, learned)

    @property
    def gated(self) -> bool:
        """The learned judge accepts only what the rule accepts: verifying needs the co-trained mwp2eq too."""
        return self.judge is not None and self.judge.info.gated_by_rule

    @property
    def can_verify(self) -> bool:
        return self.mwp2eq is not None or (self.judge is not None and not self.gated)

    def check(self, request: Request) -> Request:
        """What the model itself cannot do, as a RequestError before any generation."""
        if request.verify and not self.can_verify:
            raise RequestError("verify", "this model has no co-trained mwp2eq (it was trained without L_eq) and "
                               + ("its learned judge is gated by the rule, which parses with it"
                                  if self.judge is not None else "no learned judge was given")
                               + ", so it cannot check its problems; drop verify")
        width = self.settings["context_tokens"]
        n = sum(
            len(w) for w in encode_joint(self.tokenizer, JointExample(request.equation, "", request.context)).keywords
        )
        if n > width:
            raise RequestError("context", f"the keywords take {n} tokens and this model reads at most {width}; "
                               "give fewer or shorter keywords")
        return request

    def answer(self, request: Request, index: int = 0, deadline: float | None = None) -> list[Problem]:
        """The request's best `n` distinct problems (fewer when the samples repeat each other); `deadline`: see
        the module's docstring."""
        self.check(request)
        prompt = self.prompt(request)
        texts = self.candidates(request, prompt, deadline)
        parsed: list[str | None] = [None] * len(texts)
        verified: list[bool | None] = [None] * len(texts)
        probability: list[float | None] = [None] * len(texts)
        threshold: float | None = None  # the learned judge's for the equation's shape; None: no judge, or never
        order = list(range(len(texts)))
        if request.verify:
            check_deadline(deadline, "before the judge read the candidates")
            if self.judge is not None:
                probability = self.judge.probabilities(texts, [request.equation] * len(texts))
                rule: list[bool | None] = [None] * len(texts)
                if self.gated:
                    parsed, rule = self.rule_by_probability(texts, request.equation, probability, request.n,
                                                            deadline)
                threshold = self.judge.verified_threshold(request.equation)
                verified = [None if self.gated and r is None else
                            threshold is not None and self.judge.reaches(threshold, p, r)
                            for p, r in zip(probability, rule)]
                # stable: equal keys keep sampling order; without the gate every rule[i] is None
                order.sort(key=lambda i: (rule[i] is not True, -probability[i]))
            else:
                parsed = self.parse(texts, deadline)
                verified = [judged(p, request.equation, t) for p, t in zip(parsed, texts)]
                firmness = self.equation_firmness(texts, request.equation, deadline)
                order.sort(key=lambda i: (not verified[i], -firmness[i]))
        shown = order[: request.n]
        note = self.unverified_note(request, len(texts), threshold) if request.verify and not any(
            verified[i] for i in shown) else None
        # only the shown problems' likelihoods: nothing ranks by them
        scores = dict(zip(shown, self.mean_log_likelihood(prompt, [texts[i] for i in shown], deadline=deadline)))
        values: dict[str, str] = dict(request.values)
        if request.numbers == "auto":
            values = {k: str(v) for k, v in auto_numbers(request.equation, request.seed).items()}
        x = evaluate(request.equation, {k: number_value(v) for k, v in values.items()}) if values else None
        problems = []
        for rank, i in enumerate(shown, start=1):
            text, numbers = texts[i], {}
            if values:
                text, numbers = fill_numbers(texts[i], values, request.seed + rank)
            problems.append(Problem(index, rank, request.equation, request.given, " ".join(request.context),
                                    detokenize(text), texts[i], verified[i], parsed[i],
                                    None if x is None else format_number(x), numbers, round(scores[i], 4),
                                    None if probability[i] is None else round(probability[i], 4),
                                    None if probability[i] is None else threshold,  # unrounded: it decides
                                    note))
        return problems

    def unverified_note(self, request: Request, candidates: int, threshold: float | None) -> str:
        """What the output says when no shown problem is verified: why, in one sentence (`threshold`: the learned
        judge's for the equation's shape)."""
        if self.judge is not None and threshold is None:
            return (never_verified_reason(self.judge.info.verified, request.equation)
                    + f"; the best of {candidates} distinct candidates shown, unverified")
        return f"no verified problem among {candidates} distinct candidates; the best shown, unverified"

    def equation_firmness(self, masked_texts: Sequence[str], equation: str,
                          deadline: float | None = None) -> list[float]:
        """The co-trained mwp2eq's log p(equation | problem) per equation token, teacher-forced: the judge's rank.
        Read a batch at a time with the deadline checked before each: the batches of one call, in its order."""
        firmness: list[float] = []
        for start in range(0, len(masked_texts), MWP2EQ_BATCH):
            check_deadline(deadline, "while the rule ranked the candidates")
            rows = masked_texts[start : start + MWP2EQ_BATCH]
            firmness += [s / max(n, 1) for s, n in equation_logprobs(self.mwp2eq, self.tokenizer, rows,
                                                                     [equation] * len(rows), batch_size=MWP2EQ_BATCH)]
        return firmness

    def parse(self, masked_texts: Sequence[str], deadline: float | None = None) -> list[str]:
        """The co-trained mwp2eq's greedy reading of each problem (as ACC-eq's evaluator reads, with its prompt).
        Read a batch at a time with the deadline checked before each; the batches are those one call of
        predict_equations forms (longest prompt first, a stable order), so every reading is the same."""
        lengths = [len(encode_prompt(self.tokenizer, mwp2eq_prompt(t))) for t in masked_texts]
        order = sorted(range(len(masked_texts)), key=lambda i: lengths[i], reverse=True)
        parsed: list[str] = [""] * len(masked_texts)
        for start in range(0, len(order), MWP2EQ_BATCH):
            check_deadline(deadline, "while the rule parsed the candidates")
            rows = order[start : start + MWP2EQ_BATCH]
            readings = predict_equations(self.mwp2eq, self.tokenizer, [masked_texts[i] for i in rows],
                                         batch_size=MWP2EQ_BATCH, device=self.device)
            for i, reading in zip(rows, readings):
                parsed[i] = reading
        return parsed

    def rule_by_probability(self, texts: Sequence[str], equation: str, probability: Sequence[float], n: int,
                            deadline: float | None = None,
                            chunk: int = 8) -> tuple[list[str | None], list[bool | None]]:
        """The rule's parse and verdict of the candidates, read in order of the judge's probability, `chunk` at a
        time, until `n` are accepted: a gated judge shows the accepted ones first, each group by p, so the rest can
        never be shown. Those not read keep None (a pool with fewer than `n` accepted is read whole)."""
        parsed: list[str | None] = [None] * len(texts)
        rule: list[bool | None] = [None] * len(texts)
        by_p = sorted(range(len(texts)), key=lambda i: -probability[i])
        for start in range(0, len(by_p), chunk):
            if sum(r is True for r in rule) >= n:
                break
            check_deadline(deadline, "before the rule parsed the candidates")
            rows = by_p[start : start + chunk]
            for i, p in zip(rows, self.parse([texts[i] for i in rows], deadline)):
                parsed[i], rule[i] = p, judged(p, equation, texts[i])
        return parsed, rule

    def prompt(self, request: Request) -> torch.Tensor:
        """The generator's input embeddings for the request [P, D], as training builds them."""
        enc = encode_joint(self.tokenizer, JointExample(request.equation, "", request.context))
        return prompt_embeddings(self.generator.get_input_embeddings(), enc, self.settings["context_tokens"])

    @torch.no_grad()
    def samples(self, request: Request, prompt: torch.Tensor, deadline: float | None = None) -> list[str]:
        """Every decoded text in sampling order, repeats included (`request.candidates` of them for top_p), from the
        request's `prompt` (Service.prompt); DeadlineExceeded when decoding stopped at the deadline."""
        tok = self.tokenizer
        config = _generation_config(tok, request.decoding, request.num_beams, request.top_p, request.temperature,
                                    request.max_new_tokens)
        processors, rows, cache = LogitsProcessorList(), 1, {}
        if self.surface_constraint:  # first: the nucleus is taken among what it leaves
            processors.append(SurfaceConstraint(tok, request.equation))
        if request.decoding == "top_p":
            rows = request.candidates
            config.top_p = config.temperature = 1.0  # transformers' own warpers off: TopP does both, in their order
            processors.append(TopP(request.top_p, request.temperature))
            # Every row starts from the same prompt: its keys and values computed once and copied, not once a row.
            cache = {"cache": DynamicCache()}
            self.generator(inputs_embeds=prompt[None, :-1], use_cache=True, **cache)
            cache["cache"].batch_repeat_interleave(rows)
        torch.manual_seed(request.seed)
        out = self.generator.generate(inputs_embeds=prompt[None].expand(rows, -1, -1), attention_mask=torch.ones(
            rows, prompt.shape[0], dtype=torch.long, device=self.device), generation_config=config,
            logits_processor=processors,
            stopping_criteria=StoppingCriteriaList([_PastDeadline(deadline)]) if deadline is not None else None,
            **cache)
        check_deadline(deadline, "while the candidates were decoded")
        return [t.split("\n", 1)[0].strip() for t in tok.batch_decode(out, skip_special_tokens=True)]

    def candidates(self, request: Request, prompt: torch.Tensor, deadline: float | None = None) -> list[str]:
        """The distinct decoded texts, first occurrence kept (Service.samples without repeats)."""
        return list(dict.fromkeys(self.samples(request, prompt, deadline)))

    @torch.no_grad()
    def mean_log_likelihood(self, prompt: torch.Tensor, texts: Sequence[str], chunk: int = 8,
                            deadline: float | None = None) -> list[float]:
        """log p(text EOS | prompt) / its token count, teacher-forced as training encodes targets (prompts.py);
        `prompt`: the prompt's input embeddings [P, D]. `chunk` rows per forward pass: K = 64 candidates' logits
        at once would take gigabytes."""
        tok = self.tokenizer
        emb = self.generator.get_input_embeddings()
        targets = [list(tok(" " + t, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id] for t in texts]
        n_prompt, out = prompt.shape[0], []
        for start in range(0, len(targets), chunk):
            check_deadline(deadline, "while the candidates were scored")
            rows = targets[start : start + chunk]
            ids = [torch.tensor(t, dtype=torch.long, device=self.device) for t in rows]
            embeds, mask = pad_rows([torch.cat([prompt, emb(t)]) for t in ids])
            logits = self.generator(inputs_embeds=embeds, attention_mask=mask).logits.float()
            for i, t in enumerate(ids):
                logp = torch.log_softmax(logits[i, n_prompt - 1 : n_prompt - 1 + len(t)], dim=-1)
                out.append(float(logp.gather(-1, t[:, None]).mean()))
        return out
