"""Token accounting for LLM calls.

Token counts use tiktoken (``sirerag.text.tokens``) so that every backend, every dry
run and every cache entry is measured the same way. A backend that reports its
own usage (an OpenAI-compatible server, the local model's tokenizer) reports
that instead; :func:`request_tokens` is the fallback and the dry-run estimate.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable

from sirerag.llm.base import Completion, LLMRequest
from sirerag.text.tokens import count_tokens

#: OpenAI's chat framing: about 3 tokens around every message and 3 to prime the reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def request_tokens(request: LLMRequest, encoding: str = "cl100k_base") -> int:
    """Prompt tokens of a chat request: tiktoken counts of the message contents and
    roles plus the chat framing (the way OpenAI bills chat prompts)."""
    total = TOKENS_PER_REPLY
    for role, content in request.messages:
        total += TOKENS_PER_MESSAGE + count_tokens(role, encoding) + count_tokens(content, encoding)
    return total


def completion_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Completion tokens of a reply text (tiktoken)."""
    return count_tokens(text, encoding)


@dataclass
class StageUsage:
    """Counters of one prompt version (or stage)."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"calls": self.calls, "cached": self.cached, "failed": self.failed,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass
class UsageLedger:
    """Thread-safe running totals of LLM usage, by prompt version.

    ``calls`` counts requests answered (from the model or the cache); ``cached``
    those answered by the cache; ``failed`` permanent failures. Token totals count
    only what the model actually processed (cache hits cost nothing).
    """

    by_prompt: dict[str, StageUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, request: LLMRequest, completion: Completion) -> None:
        with self._lock:
            usage = self.by_prompt.setdefault(request.prompt_version or "-", StageUsage())
            usage.calls += 1
            if completion.cached:
                usage.cached += 1
            else:
                usage.prompt_tokens += completion.prompt_tokens
                usage.completion_tokens += completion.completion_tokens

    def record_failure(self, request: LLMRequest) -> None:
        with self._lock:
            self.by_prompt.setdefault(request.prompt_version or "-", StageUsage()).failed += 1

    def total(self) -> StageUsage:
        with self._lock:
            return _sum(self.by_prompt.values())

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{prompt_version: counters, ..., "total": counters}``."""
        with self._lock:
            out = {name: u.as_dict() for name, u in sorted(self.by_prompt.items())}
            out["total"] = _sum(self.by_prompt.values()).as_dict()
        return out


def _sum(items: Iterable[StageUsage]) -> StageUsage:
    total = StageUsage()
    for u in items:
        total.calls += u.calls
        total.cached += u.cached
        total.failed += u.failed
        total.prompt_tokens += u.prompt_tokens
        total.completion_tokens += u.completion_tokens
    return total
