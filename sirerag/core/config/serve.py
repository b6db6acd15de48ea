"""Settings of ``sirerag serve`` and ``sirerag mcp``: where the server listens and how much work one request may ask."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check

#: the environment variable the command line reads the API key from (the library takes the key as an argument)
API_KEY_ENV = "SIRERAG_API_KEY"
#: an API key shorter than this is refused (a guessable key protects nothing)
MIN_API_KEY_CHARS = 16


@dataclass(frozen=True)
class ServeConfig:
    """What a server accepts; every bound is checked before any work, and breaking one is an HTTP 400
    (413 for the body) naming the field and the bound.

    Attributes:
        host, port: where to listen (``port=0``: one the system picks).
        max_body_bytes: request body size at most.
        max_query_chars: characters of one query or question at most.
        max_k: entries one query may ask for at most.
        max_batch: queries of one ``/search`` request at most.
        max_token_budget, max_answer_tokens: an ``/ask``'s ``token_budget`` and ``max_tokens`` at most.
        max_retrievers: retriever settings (a name with its options) one index keeps loaded at most.
        workers: threads that run searches (0: one per usable core).
        llm: the reader of ``/ask`` (an LLM spec, as ``sirerag ask --llm``); None: ``/ask`` answers 400.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 1_048_576
    max_query_chars: int = 2_000
    max_k: int = 100
    max_batch: int = 64
    max_token_budget: int = 8_192
    max_answer_tokens: int = 1_024
    max_retrievers: int = 16
    workers: int = 0
    llm: str | None = None

    def validate(self) -> "ServeConfig":
        check_types(self, "serve")
        check(bool(self.host), "--host", self.host, "a host name or address")
        check(0 <= self.port <= 65535, "--port", self.port, "a port number from 0 to 65535")
        for name in ("max_body_bytes", "max_query_chars", "max_k", "max_batch", "max_token_budget",
                     "max_answer_tokens", "max_retrievers"):
            check(getattr(self, name) >= 1, f"serve.{name}", getattr(self, name), "a positive integer")
        check(self.workers >= 0, "--workers", self.workers, "0 (one per core) or a positive integer")
        return self
