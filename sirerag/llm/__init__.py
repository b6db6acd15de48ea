"""LLM layer: the protocol, backends (OpenAI-compatible, local HF), the call cache, prompts, and the HTTP layer
the OpenAI embedder shares (:mod:`.http`).

Create a backend with :func:`load_llm` (``openai:MODEL``, ``openai:MODEL@URL``,
``hf:smollm2``, ``hf:PATH[+adapter=DIR]``); pass ``cache_dir`` to cache every call.
"""
from __future__ import annotations

from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest, StreamingLLM, TransientLLMError
from sirerag.llm.factory import load_llm, parse_spec

__all__ = ["LLM", "Completion", "LLMCallError", "LLMRequest", "StreamingLLM", "TransientLLMError", "load_llm",
           "parse_spec"]
