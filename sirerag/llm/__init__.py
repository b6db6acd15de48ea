"""LLM layer: the protocol, backends (OpenAI-compatible, local HF), the call cache and prompts."""
from __future__ import annotations

from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest, TransientLLMError

__all__ = ["LLM", "Completion", "LLMCallError", "LLMRequest", "TransientLLMError"]
