"""A consistency judge learned from blind readings: p(problem M encodes equation E).

A causal LM reads "problem: M equation: E consistent:"; its hidden state after `layer` decoder layers at the
prompt's last token goes through a linear head, h -> sigmoid(w . h + b). Only the first `layer` layers are kept
(the middle of the network separates right from wrong best, studies/learned_judge), so a judgement costs a fraction
of one forward pass of the LM. The head is fitted by L2-penalised logistic regression on standardised hidden
states (`fit_head`); `finetune` may then train the top decoder layers and the head together on the same readings.
A threshold turns p into a verdict; it is chosen on readings of validation equations (`threshold_at_recall`).

A judge may be gated by the rule (mwpgen/judge.py: a parse of the problem is E and the surface checks pass): it then
accepts only what the rule accepts and whose p reaches the threshold, and ranks by the rule first, then p
(`gated_scores`). The rule has the parse, which the head lacks; the head ranks what the rule accepts
(studies/learned_judge/gate.py). Whoever applies a gated judge gives it the rule's verdicts.

The backbone is any causal LM folder: the fold's evaluator (it already reads problems into equations) or the
pre-trained LM.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch

PROMPT = "problem: {problem} equation: {equation} consistent:"
INFO_FILE = "judge.json"
HEAD_FILE = "head.pt"
# What train_judge leaves where it adopts no judge (no readings of the fold, or the rule judged validation as well):
# {"reason": ..., "figures": {...}}; whoever looks for the fold's judge then keeps the rule (mwpgen/judge.py).
NO_JUDGE_FILE = "no_judge.json"


def judge_prompt(problem: str, equation: str) -> str:
    return PROMPT.format(problem=problem, equation=equation)


@dataclass
class JudgeInfo:
    """What a saved judge is: where its backbone came from, which layer it reads, its threshold and how it was
    measured (filled by whoever trains it)."""
    backbone: str
    layer: int
    threshold: float = 0.5
    trained_layers: int = 0  # decoder layers fine-tuned on the readings (0: a probe on frozen states)
    gated_by_rule: bool = False  # accepts only what the rule accepts (the module's docstring)
    measured: dict = field(default_factory=dict)


# JudgeInfo's fields and the JSON types each may hold (bool is not a number here: `"layer": true` is a mistake)
_INFO_TYPES = {"backbone": (str,), "layer": (int,), "threshold": (int, float), "trained_layers": (int,),
               "gated_by_rule": (bool,), "measured": (dict,)}


def _json_object(path: Path) -> dict:
    """A judge folder's JSON file as a dict; unreadable, not JSON or not an object: one error naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{path}: not a readable JSON file ({e}); run its train_judge stage again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_info(folder: str | Path) -> JudgeInfo:
    """The JudgeInfo of the judge saved in `folder`; a missing, unknown or mistyped key is one error naming the file
    and the key."""
    path = Path(folder) / INFO_FILE
    data = _json_object(path)
    missing = [k for k in ("backbone", "layer") if k not in data]
    unknown = sorted(set(data) - set(_INFO_TYPES))
    if missing or unknown:
        raise ValueError(f"{path}: " + "; ".join(
            ([f"missing key(s) {', '.join(missing)}"] if missing else [])
            + ([f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_INFO_TYPES)})"] if unknown else [])))
    for key, value in data.items():
        if isinstance(value, bool) is not (_INFO_TYPES[key] == (bool,)) or not isinstance(value, _INFO_TYPES[key]):
            raise ValueError(f"{path}: key {key!r} must be {' or '.join(t.__name__ for t in _INFO_TYPES[key])}, "
                             f"got {value!r}")
    return JudgeInfo(**data)


def no_judge_reason(folder: str | Path) -> str:
    """Why `folder` holds no judge: its NO_JUDGE_FILE's reason (a malformed one is an error naming it), else what is
    missing."""
    folder = Path(folder)
    path = folder / NO_JUDGE_FILE
    if not path.exists():
        return f"no {INFO_FILE} in {folder}" if folder.is_dir() else f"no such folder {folder}"
    reason = _json_object(path).get("reason")
    if not isinstance(reason, str):
        raise ValueError(f"{path}: key 'reason' must be a string saying why the fold has no judge, got {reason!r}")
    return reason


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
    def from_lm(cls, folder: str | Path, layer: int, device: str = "cpu") -> "LearnedJudge":
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
        from mwpgen.lm.decoding import _left_pad  # noqa: PLC2701 - the project's own helper

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

    def save(self, folder: str | Path) -> Path:
        from mwpgen.io import atomic_directory

        with atomic_directory(Path(folder)) as tmp:
            self.backbone.save_pretrained(tmp, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            torch.save({"head": self.head.state_dict(), "mean": self.mean.cpu(), "std": self.std.cpu()},
                       tmp / HEAD_FILE)
            (tmp / INFO_FILE).write_text(json.dumps(asdict(self.info), indent=2) + "\n", encoding="utf-8")
        return Path(folder)

    @classmethod
    def load(cls, folder: str | Path, device: str = "cpu") -> "LearnedJudge":
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


def accepts(info: JudgeInfo, probability: float, rule: bool | None = None) -> bool:
    """The verdict of the judge `info` describes on a problem of judge probability `probability`; `rule`: the rule's
    verdict on it, which a gated judge needs (an error without it)."""
    if info.gated_by_rule:
        if rule is None:
            raise ValueError("this judge is gated by the rule (judge.json: gated_by_rule): give the rule's verdict")
        if not rule:
            return False
    return probability >= info.threshold


def gated_scores(probabilities: Sequence[float], rule: Sequence[bool]) -> list[float]:
    """p where the rule accepts, 0 where it rejects: ranking by it is the rule first, then p; a threshold above 0 on
    it is the gated verdict."""
    if len(probabilities) != len(rule):
        raise ValueError(f"{len(probabilities)} judge probabilities for {len(rule)} rule verdicts")
    return [float(q) if r else 0.0 for q, r in zip(probabilities, rule)]


def judge_predictions(predictions: list[dict], probabilities: Sequence[float], info: JudgeInfo) -> float:
    """Add the learned judge's p ("judge_probability", to 4 places) and verdict ("learned_judged": `accepts`, on the
    unrounded p; a gated judge reads the rule's verdict from each record's "judged") to each prediction record of the
    evaluate stage, one p per record, and return the share it accepts: the "consistency (learned)" score. The rule's
    "judged" is left as it is (mwpgen.judge)."""
    if len(probabilities) != len(predictions):
        raise ValueError(f"{len(probabilities)} judge probabilities for {len(predictions)} predictions")
    for p, q in zip(predictions, probabilities):
        p["judge_probability"] = round(float(q), 4)
        p["learned_judged"] = accepts(info, q, p.get("judged"))
    return sum(p["learned_judged"] for p in predictions) / max(len(predictions), 1)


def has_judge(folder: str | Path) -> bool:
    """Whether `folder` holds a saved judge (a fold without readings gets only NO_JUDGE_FILE)."""
    return (Path(folder) / INFO_FILE).exists()


def save_no_judge(folder: str | Path, reason: str, figures: dict | None = None) -> Path:
    """The train_judge stage's output for a fold where it adopts no judge: a folder that says why (and the `figures`
    that decided it), so that the stages and the product that look for the fold's judge keep the rule
    (mwpgen.judge)."""
    from mwpgen.io import atomic_directory

    record = {"reason": reason, **({"figures": figures} if figures else {})}
    with atomic_directory(Path(folder)) as tmp:
        (tmp / NO_JUDGE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return Path(folder)


def logistic_regression(x: torch.Tensor, y: torch.Tensor, l2: float, *, steps: int = 100,
                        tolerance: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L2-penalised logistic regression on standardised x [N, F] by Newton steps (at most `steps`, until no weight
    moves by `tolerance`): (weights with the bias last, mean, std). The bias is not shrunk."""
    x = x.double()
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    z = torch.cat([(x - mean) / std, torch.ones(len(x), 1, dtype=torch.float64)], 1)
    y = y.double()
    w = torch.zeros(z.shape[1], dtype=torch.float64)
    penalty = torch.full((z.shape[1],), float(l2), dtype=torch.float64)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = torch.sigmoid(z @ w)
        grad = z.T @ (p - y) + penalty * w
        hess = z.T @ (z * (p * (1 - p)).unsqueeze(1)) + torch.diag(penalty)
        step = torch.linalg.solve(hess, grad)
        w = w - step
        if float(step.abs().max()) < tolerance:
            break
    return w, mean, std


def fit_head(judge: LearnedJudge, states: torch.Tensor, labels: Sequence[int], l2: float) -> LearnedJudge:
    """The head as the L2-penalised logistic regression of the labels on the (standardised) hidden states."""
    w, mean, std = logistic_regression(states, torch.tensor(list(labels)), l2)
    with torch.no_grad():
        judge.mean.copy_(mean.float())
        judge.std.copy_(std.float())
        judge.head.weight.copy_(w[:-1].float()[None])
        judge.head.bias.fill_(float(w[-1]))
    return judge


def finetune(judge: LearnedJudge, problems: Sequence[str], equations: Sequence[str], labels: Sequence[int], *,
             layers: int, epochs: int, lr: float, batch_size: int = 16, seed: int = 0,
             autocast: torch.dtype | None = None, log=None) -> LearnedJudge:
    """Train the top `layers` decoder layers and the head on the readings (binary cross-entropy, unweighted so that p
    stays a probability), starting from the fitted head. The layers below stay frozen."""
    blocks = decoder_layers(judge.backbone)
    for p in judge.backbone.parameters():
        p.requires_grad_(False)
    trainable = [p for block in list(blocks)[len(blocks) - layers:] for p in block.parameters()]
    norm = getattr(judge.backbone, "norm", None) or getattr(judge.backbone, "ln_f", None)
    if norm is not None:
        trainable += list(norm.parameters())
    for p in trainable:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW([{"params": trainable, "lr": lr}, {"params": judge.head.parameters(), "lr": lr * 10}],
                                  weight_decay=0.01)
    y = torch.tensor(list(labels), dtype=torch.float32)
    encoded = judge.encode(problems, equations)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    judge.train()
    step = 0
    for epoch in range(epochs):
        order = list(range(len(encoded)))
        rng.shuffle(order)
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            (rows, ids, mask), = judge.batches([encoded[i] for i in idx], len(idx))
            with torch.autocast(judge.device.type, dtype=autocast, enabled=autocast is not None):
                states = judge.states(ids, mask)
            target = y[[idx[k] for k in rows]].to(judge.device)  # batches() put the rows in length order
            loss = torch.nn.functional.binary_cross_entropy_with_logits(judge.logits(states), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if log is not None:
                log(epoch, step, float(loss.detach()))
    judge.eval()
    judge.info.trained_layers = layers
    return judge


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """P(a right problem scores above a wrong one), ties half (Mann-Whitney, by ranks)."""
    pairs = sorted(zip(scores, labels))
    n_pos = sum(labels)
    n_neg = len(labels) - n_pos
    if not n_pos or not n_neg:
        return math.nan
    rank_sum, i = 0.0, 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # ranks i+1..j share their mean
        rank_sum += mid * sum(y for _, y in pairs[i:j])
        i = j
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def precision_at_recall(scores: Sequence[float], labels: Sequence[int], recall: float = 0.5) -> float:
    """The precision of the highest-scoring problems that hold `recall` of the right ones."""
    ranked = sorted(zip(scores, labels), key=lambda t: -t[0])
    need, tp = recall * sum(labels), 0
    for k, (_, y) in enumerate(ranked, start=1):
        tp += y
        if tp >= need:
            return tp / k
    return math.nan


def threshold_at_recall(scores: Sequence[float], labels: Sequence[int], recall: float) -> float:
    """The highest threshold that accepts at least `recall` of the right problems."""
    right = sorted((s for s, y in zip(scores, labels) if y), reverse=True)
    if not right:
        return 1.0
    return right[max(0, math.ceil(recall * len(right)) - 1)]


def precision_recall(scores: Sequence[float], labels: Sequence[int], threshold: float) -> dict:
    tp = sum(s >= threshold and y == 1 for s, y in zip(scores, labels))
    fp = sum(s >= threshold and y == 0 for s, y in zip(scores, labels))
    positives = sum(labels)
    return {"threshold": threshold, "precision": tp / (tp + fp) if tp + fp else math.nan,
            "recall": tp / positives if positives else math.nan, "accepted": tp + fp}
