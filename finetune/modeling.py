"""Loading the base model for LoRA training, and turning chat rows into training tensors.

The loss is computed on assistant tokens only. Each assistant turn's span is
found by rendering the conversation with the tokenizer's own chat template up
to that turn twice, with and without the turn, so the training text is exactly
what the serving backend renders at inference time (including any default
system prompt the template inserts).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from sirerag.core.errors import ConfigError, InputError, require
from sirerag.core.io import read_jsonl

from sirerag_finetune.config import ModelConfig

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class EncodedExample:
    """Token ids of one conversation; ``labels`` is ``IGNORE_INDEX`` outside assistant turns."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]

    @property
    def n_target_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE_INDEX)


def read_chat_jsonl(path: str | Path) -> list[list[dict[str, str]]]:
    """Read chat rows ``{"messages": [{"role", "content"}, ...], ...}``; other keys are ignored.

    Raises:
        InputError: a row has no ``messages`` list, an unknown role, a non-string
            content, or no assistant turn (the message names file and row).
    """
    rows: list[list[dict[str, str]]] = []
    for n, row in enumerate(read_jsonl(path), start=1):
        messages = row.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InputError(f"{path}: row {n}: expected a non-empty 'messages' list")
        for m in messages:
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise InputError(f"{path}: row {n}: each message needs 'role' in {ROLES} and a string "
                                 f"'content', got {m!r:.120}")
        if not any(m["role"] == "assistant" for m in messages):
            raise InputError(f"{path}: row {n}: no assistant message to learn from")
        rows.append([{"role": m["role"], "content": m["content"]} for m in messages])
    return rows


def _render(tokenizer: Any, messages: Sequence[Mapping[str, str]], *, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)


def encode_chat(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> EncodedExample:
    """Tokenise a conversation with the chat template; only assistant tokens get labels.

    Raises:
        ConfigError: the tokenizer has no chat template, or the template does not
            render a conversation as a prefix of its continuation (so assistant
            spans cannot be located).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError("the base model's tokenizer has no chat template; train from an instruct/chat model")
    input_ids: list[int] = []
    labels: list[int] = []
    rendered = ""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _render(tokenizer, messages[:i], generation_prompt=True)
        full = _render(tokenizer, messages[: i + 1], generation_prompt=False)
        if not prompt.startswith(rendered) or not full.startswith(prompt):
            raise ConfigError("the chat template does not render conversations incrementally (turn "
                              f"{i} changes earlier text); cannot mask the prompt tokens")
        prompt_ids = tokenizer(prompt[len(rendered):], add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
        input_ids += prompt_ids + target_ids
        labels += [IGNORE_INDEX] * len(prompt_ids) + list(target_ids)
        rendered = full
    return EncodedExample(tuple(input_ids), tuple(labels))


def encode_rows(
    tokenizer: Any, rows: Iterable[Sequence[Mapping[str, str]]], max_length: int
) -> tuple[list[EncodedExample], int]:
    """Encode rows; rows longer than ``max_length`` tokens are dropped. Returns (kept, n_dropped)."""
    kept: list[EncodedExample] = []
    dropped = 0
    for messages in rows:
        example = encode_chat(tokenizer, messages)
        if len(example.input_ids) > max_length or example.n_target_tokens == 0:
            dropped += 1
            continue
        kept.append(example)
    if dropped:
        logger.warning("dropped %d example(s) longer than max_length=%d tokens", dropped, max_length)
    return kept, dropped


def resolve_dtype(name: str) -> Any:
    """``auto`` -> bfloat16 on a CUDA GPU with bf16 support, else float32."""
    import torch

    cuda_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if name == "auto":
        return torch.bfloat16 if cuda_bf16 else torch.float32
    if name == "bfloat16" and not cuda_bf16:
        raise ConfigError("model.dtype must be 'auto' or 'float32' without a CUDA GPU that supports bf16, "
                          "got 'bfloat16'")
    return getattr(torch, name)


def load_base_model(config: ModelConfig, *, dtype: Any | None = None) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` for training from ``config.base``.

    ``smollm2`` and GGUF files are dequantised by transformers; the same loader is
    used when an adapter is reloaded, so adapters always meet the base they were
    trained on.

    Raises:
        MissingExtraError: transformers is not installed.
        ConfigError: the base cannot be found locally.
    """
    import torch

    transformers = require("transformers", "finetune", purpose="LoRA fine-tuning")
    from sirerag.llm.hf_backend import resolve_model

    path, gguf_file, _label = resolve_model(config.base)
    gguf_file = config.gguf_file or gguf_file
    kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    torch_dtype = dtype if dtype is not None else resolve_dtype(config.dtype)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, **kwargs)
        model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, **kwargs)
    except OSError as exc:
        raise ConfigError(f"model.base {config.base!r} could not be loaded from local files ({exc}); "
                          "give a local folder or a model already in the Hugging Face cache") from exc
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    logger.info("loaded base %s (%s, %s) on %s", config.base, gguf_file or "safetensors", torch_dtype, device)
    return model, tokenizer


def serve_spec(config: ModelConfig, adapter_dir: str | Path) -> str:
    """The LLM spec that serves ``adapter_dir`` on this base: ``hf:BASE+adapter=DIR``."""
    base = config.base
    if config.gguf_file:
        from sirerag.llm.hf_backend import resolve_model

        base = str(Path(resolve_model(config.base)[0]) / config.gguf_file)
    return f"hf:{base}+adapter={Path(adapter_dir).resolve()}"


def load_adapter_model(config: ModelConfig, adapter_dir: str | Path) -> tuple[Any, Any]:
    """Load the base and apply a saved LoRA adapter, in eval mode: ``(model, tokenizer)``."""
    peft = require("peft", "finetune", purpose="LoRA adapters")
    model, tokenizer = load_base_model(config)
    model = peft.PeftModel.from_pretrained(model, str(adapter_dir))
    model.eval()
    return model, tokenizer
