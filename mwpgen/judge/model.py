"""The learned consistency judge: p(problem M encodes equation E), read from blind readings.

A causal LM reads "problem: M equation: E consistent:"; its hidden state after `layer` decoder layers at the
prompt's last token goes through a linear head, h -> sigmoid(w . h + b). Only the first `layer` layers are kept
(the middle of the network separates right from wrong best, studies/learned_judge), so a judgement costs a fraction
of one forward pass of the LM. How the head (and, optionally, the top layers) are fitted is mwpgen/judge/fit.py; how
the stage train_judge fits and chooses a judge on readings, mwpgen/judge/choose.py. A threshold turns p into a
verdict, and a judge may be gated by the rule (mwpgen/judge/verdicts.py); both are in its judge.json
(mwpgen/judge/saved.py).

The backbone is any causal LM folder: the fold's evaluator (it already reads problems into equations) or the
pre-trained LM.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from mwpgen.judge.saved import (
    HEAD_FILE,
    INFO_FILE,
    NO_JUDGE_FILE,
    JudgeInfo,
    has_judge,
    no_judge_reason,
    read_info,
    write_info,
)
from mwpgen.judge.verdicts import accepts, reaches, verifies
from mwpgen.judge.verified import verified_threshold

PROMPT = "problem: {problem} equation: {equation} consistent:"


def judge_prompt(problem: str, equation: str) -> str:
    return PROMPT.format(problem=problem, equation=equation)


def decoder_layers(model) -> torch.nn.ModuleList:
    """The decoder blocks of a causal LM's base model (Llama-style `layers`, GPT-2's `h`)."""
    base = model.base_model
    layers = getattr(base, "layers", None)
    return layers if layers is not None else base.h


class LearnedJudge(torch.nn.Module):
    def __init__(self, backbone, tokenizer, info: JudgeInfo, head: torch.nn.Linear | None = None,
                 mean: torch.Tensor | None = None, std: torch.Tensor | None = None):
        super().__init__()
        self.backbone, self.tokenizer, self.info = backbone, tokenizer, info
        width = backbone.config.hidden_size
        self.head = head or torch.nn.Linear(width, 1)
        self.register_buffer("mean", torch.zeros(width) if mean is None else mean.float())
        self.register_buffer("std", torch.ones(width) if std is None else std.float())

    @classmethod
    def from_lm(cls, folder: str | Path, layer: int, device: str = "cpu") -> LearnedJudge:
        """A judge with an untrained head over the first `layer` decoder layers of the causal LM in `folder` (a
        trained model's folder, or a model spec as params' train.model names one: `smollm2-135m`, an HF id)."""
        from mwpgen.lm.loading import load_model_and_tokenizer, load_trained

        if isinstance(folder, str) and not Path(folder).exists():  # a spec, not a folder: the pre-trained LM
            model, tokenizer = load_model_and_tokenizer(folder, device=device)
        else:
            model, tokenizer = load_trained(Path(folder), device)
        layers = decoder_layers(model)
        if not 1 <= layer <= len(layers):
            raise ValueError(f"layer must be within 1..{len(layers)} for {folder}, got {layer}")
        del layers[layer:]
        model.config.num_hidden_layers = layer
        return cls(model.base_model, tokenizer, JudgeInfo(backbone=str(folder), layer=layer)).to(device)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def encode(self, problems: Sequence[str], equations: Sequence[str]) -> list[list[int]]:
        return [list(self.tokenizer(judge_prompt(p, e))["input_ids"]) for p, e in zip(problems, equations)]

    def states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden state at each left-padded row's last token [B, D] (the base model's output: its final norm).
        Positions count from each row's first real token: without them an absolute-position backbone (GPT-2) would
        read a prompt at other positions beside a longer one, and its p would depend on the batch it came in."""
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.backbone(input_ids=ids, attention_mask=mask, position_ids=positions)
        return out.last_hidden_state[:, -1].float()

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return self.head((states - self.mean) / self.std).squeeze(-1)

    def batches(self, encoded: Sequence[list[int]], batch_size: int):
        """(row indices, ids, mask) of left-padded batches, shortest prompts together."""
        from mwpgen.lm.decoding import _left_pad  # the project's own helper, private to its module

        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = _left_pad([encoded[i] for i in idx], self.tokenizer.pad_token_id)
            yield idx, ids.to(self.device), mask.to(self.device)

    @torch.no_grad()
    def hidden(self, problems: Sequence[str], equations: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """[N, D] hidden states of the judge's layer, in the caller's order."""
        was = self.training
        self.eval()
        out = torch.zeros(len(problems), self.backbone.config.hidden_size)
        for idx, ids, mask in self.batches(self.encode(problems, equations), batch_size):
            out[idx] = self.states(ids, mask).cpu()
        self.train(was)
        return out

    @torch.no_grad()
    def probabilities(self, problems: Sequence[str], equations: Sequence[str], batch_size: int = 32) -> list[float]:
        if not problems:
            return []
        states = self.hidden(problems, equations, batch_size).to(self.device)
        return torch.sigmoid(self.logits(states)).tolist()

    def accepts(self, probability: float, rule: bool | None = None) -> bool:
        """p reaches the threshold, and for a gated judge the rule accepts too (`rule`: its verdict, required)."""
        return accepts(self.info, probability, rule)

    def verifies(self, probability: float, rule: bool | None, equation: str) -> bool:
        """Whether a problem written for `equation` is shown "verified: yes" (mwpgen/judge/verified.py)."""
        return verifies(self.info, probability, rule, equation)

    def verified_threshold(self, equation: str) -> float | None:
        """The threshold "verified: yes" holds a problem written for `equation` to; None: never verified."""
        return verified_threshold(self.info.verified, self.info.threshold, equation)

    def reaches(self, threshold: float, probability: float, rule: bool | None) -> bool:
        """Whether a problem of `probability` (and the rule's verdict `rule`, for a gated judge) reaches `threshold`:
        `verifies` with the equation's threshold looked up once for all its candidates."""
        return reaches(self.info, threshold, probability, rule)

    def save(self, folder: str | Path) -> Path:
        from mwpgen.io import atomic_directory

        with atomic_directory(Path(folder)) as tmp:
            self.backbone.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            torch.save({"head": self.head.state_dict(), "mean": self.mean.cpu(), "std": self.std.cpu()},
                       tmp / HEAD_FILE)
            write_info(self.info, tmp)
        return Path(folder)

    @classmethod
    def load(cls, folder: str | Path, device: str = "cpu") -> LearnedJudge:
        from transformers import AutoModel, AutoTokenizer

        from mwpgen.lm.loading import prepare_tokenizer

        folder = Path(folder)
        if not has_judge(folder):
            if (folder / NO_JUDGE_FILE).exists():
                raise FileNotFoundError(f"no learned judge at {folder}: {no_judge_reason(folder)}")
            raise FileNotFoundError(f"no learned judge at {folder} (no {INFO_FILE}); run its train_judge stage first")
        info = read_info(folder)
        backbone = AutoModel.from_pretrained(folder, dtype=torch.float32)
        tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(folder))
        saved = torch.load(folder / HEAD_FILE, map_location="cpu", weights_only=True)
        judge = cls(backbone, tokenizer, info, mean=saved["mean"], std=saved["std"])
        judge.head.load_state_dict(saved["head"])
        return judge.to(device).eval()
