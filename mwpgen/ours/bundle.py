"""A trained "ours" model on disk, and inference with it: the selector picks each test problem's context and
the generator writes the problem from the same inputs it was trained on.

Bundle folder (written atomically):
    generator/             the fine-tuned LM (save_pretrained, with its tokenizer)
    selector.safetensors   q_Psi: w, b and the frozen pre-trained embedding matrix it reads (Eq. 5)
    mwp2eq/                the co-trained mwp2eq p_Phi (save_pretrained, with the shared tokenizer), when ours was
                           trained with L_eq; absent otherwise (and in bundles written before it was kept)
    ours.json              the switches it was trained with (context source, threshold, ...)
The co-trained mwp2eq is kept so that `mwpgen generate --verify` can check a problem before showing it (it
parses each candidate back into an equation, mwpgen/generate/service.py). It never scores anything: ACC-eq is judged by
the independent evaluator only.

Inference context. Inference builds the generator's input as training does (inputs.prompt_embeddings): the
context slot of `context_tokens` embeddings holds the words with the deterministic c = 1{q > threshold} (the
paper's "selected keywords"), or a heuristic context source's keywords (Table 4's keyword rows), then zero vectors.
The prompt is therefore built as embeddings, and decoding starts from `inputs_embeds`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from mwpgen.io import atomic_directory
from mwpgen.lm.decoding import Decoding, _generation_config
from mwpgen.ours.inputs import JointExample, encode_joint, pad_rows, prompt_embeddings
from mwpgen.ours.selector import ContextSelector, selected_words, selector_batch

BUNDLE_FORMAT = "mwpgen-ours/2"  # /2: the fixed-width context slot (context_tokens)
MWP2EQ_DIR = "mwp2eq"


def save_bundle(out_dir: Path, generator, tokenizer, selector: ContextSelector | None, settings: dict,
                mwp2eq=None) -> Path:
    """Write the bundle atomically; `mwp2eq` is the co-trained parser (None: a variant without L_eq)."""
    with atomic_directory(out_dir) as tmp:
        generator.save_pretrained(tmp / "generator", safe_serialization=True)
        tokenizer.save_pretrained(tmp / "generator")
        if mwp2eq is not None:
            mwp2eq.save_pretrained(tmp / MWP2EQ_DIR, safe_serialization=True)
            tokenizer.save_pretrained(tmp / MWP2EQ_DIR)  # the shared vocabulary (Eq. 4), so it loads on its own
        if selector is not None:
            save_file({k: v.detach().cpu().contiguous() for k, v in selector.state_dict().items()},
                      str(tmp / "selector.safetensors"))
        (tmp / "ours.json").write_text(json.dumps({"format": BUNDLE_FORMAT, **settings}, indent=2) + "\n",
                                       encoding="utf-8")
    return Path(out_dir)


def bundle_settings(path: Path) -> dict:
    """The switches a bundle was trained with (ours.json)."""
    meta = Path(path) / "ours.json"
    if not meta.exists():
        raise FileNotFoundError(f"no trained 'ours' model at {path} (missing ours.json); run its train stage first")
    settings = json.loads(meta.read_text(encoding="utf-8"))
    if settings.get("format") != BUNDLE_FORMAT:
        raise ValueError(f"{meta}: not a {BUNDLE_FORMAT} bundle (format {settings.get('format')!r})")
    return settings


def load_bundle(path: Path, device: str = "cpu"):
    """(generator, tokenizer, selector or None, settings)."""
    from mwpgen.lm.loading import load_model_and_tokenizer

    path = Path(path)
    settings = bundle_settings(path)
    generator, tokenizer = load_model_and_tokenizer(str(path / "generator"), path, pretrained=True, device=device)
    selector = None
    if (path / "selector.safetensors").exists():
        selector = load_selector(path / "selector.safetensors", settings.get("selector", "eq5")).to(device).eval()
    return generator.eval(), tokenizer, selector, settings


def load_selector(file: Path, form: str) -> ContextSelector:
    """The bundle's selector; a file that cannot be read (a truncated copy) is one error naming it."""
    from safetensors import SafetensorError

    try:
        state = load_file(str(file))
    except SafetensorError as e:  # safetensors' own message names no file
        raise ValueError(f"{file}: the selector's weights cannot be read ({e}); copy or train the bundle again") \
            from None
    selector = ContextSelector(state["embeddings"], form=form)
    selector.load_state_dict(state)
    return selector


def load_mwp2eq(path: Path, device: str = "cpu"):
    """The bundle's co-trained mwp2eq in eval mode, or None when ours was trained without one."""
    from mwpgen.lm.loading import load_model_and_tokenizer

    folder = Path(path) / MWP2EQ_DIR
    if not (folder / "config.json").exists():
        return None
    model, _ = load_model_and_tokenizer(str(folder), Path(path), pretrained=True, device=device)
    return model.eval()


@torch.no_grad()
def select_context(selector: ContextSelector, encoded: Sequence, threshold: float) -> tuple[torch.Tensor, list]:
    """Deterministic c = 1{q > threshold} [B, T] and each problem's selected words (Table 5)."""
    sel = selector_batch([e.problem for e in encoded], 0, selector.embeddings.device)
    q = selector(**sel)
    words = [selected_words(e.problem, q[i, : len(e.problem.ids)], threshold) for i, e in enumerate(encoded)]
    return (q > threshold).float(), words


@torch.no_grad()
def generate_with_context(generator, tokenizer, selector: ContextSelector | None, examples: Sequence[JointExample],
                          *, width: int, threshold: float = 0.5, max_problem_tokens: int | None = 96,
                          batch_size: int = 16,
                          decoding: Decoding = "greedy", num_beams: int = 4, top_p: float = 0.9,
                          temperature: float = 1.0, max_new_tokens: int = 80, seed: int = 0) -> tuple[list, list]:
    """(generated problem per example, context words per example). With a selector the context is chosen from
    each example's problem text; without one it is the example's keywords. `width`: the bundle's context_tokens."""
    torch.manual_seed(seed)
    config = _generation_config(tokenizer, decoding, num_beams, top_p, temperature, max_new_tokens)
    encoded = [encode_joint(tokenizer, ex, max_problem_tokens) for ex in examples]
    emb = generator.get_input_embeddings()
    texts: list[str] = [""] * len(examples)
    contexts: list[list[str]] = [list(ex.keywords) for ex in examples]
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start : start + batch_size]
        c = None
        if selector is not None:
            c, words = select_context(selector, chunk, threshold)
            contexts[start : start + len(chunk)] = words
        rows = [prompt_embeddings(emb, e, width, None if c is None else c[i]) for i, e in enumerate(chunk)]
        embeds, mask = pad_rows(rows, left=True)
        out = generator.generate(inputs_embeds=embeds, attention_mask=mask, generation_config=config)
        for i, text in enumerate(tokenizer.batch_decode(out, skip_special_tokens=True)):
            texts[start + i] = text.split("\n", 1)[0].strip()
    return texts, contexts
