"""The ``[llm]`` section: which LLM a build or an ask uses, and how long it may wait for it."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check


@dataclass(frozen=True)
class LLMConfig:
    """``spec`` is None for the offline algorithms, else e.g. ``openai:gpt-4o-mini``,
    ``openai:MODEL@http://127.0.0.1:8000/v1``, ``hf:/path/to/model``, ``hf:smollm2``.
    Keys come from the environment variable named by ``api_key_env``, never from files;
    ``base_url_env`` names the variable read for a server URL when the spec gives none.
    Retries (transient errors only) wait ``retry_base_delay * 2**attempt`` seconds with
    jitter, at most ``retry_max_delay``; a server's ``Retry-After`` is honoured up to
    ``retry_after_max`` seconds. One call with its retries and waits ends within ``deadline``
    seconds (``sirerag ask`` counts it over the whole ask, the endpoint check included).
    ``batch_size`` and ``device`` (``auto``, ``cpu``, ``cuda``...) apply to local ``hf:`` models."""

    spec: str | None = None
    max_concurrency: int = 16
    max_retries: int = 5
    timeout: float = 120.0
    temperature: float = 0.0
    api_key_env: str = "OPENAI_API_KEY"
    base_url_env: str = "OPENAI_BASE_URL"
    retry_base_delay: float = 1.0
    retry_max_delay: float = 60.0
    retry_after_max: float = 30.0
    deadline: float = 600.0
    batch_size: int = 8
    device: str = "auto"

    def validate(self) -> None:
        check_types(self, "llm")
        check(self.max_concurrency >= 1, "llm.max_concurrency", self.max_concurrency, "an integer >= 1")
        check(self.max_retries >= 0, "llm.max_retries", self.max_retries, "an integer >= 0")
        check(self.timeout > 0, "llm.timeout", self.timeout, "a positive number of seconds")
        check(0.0 <= self.temperature <= 2.0, "llm.temperature", self.temperature, "a number in [0, 2]")
        check(self.retry_base_delay >= 0, "llm.retry_base_delay", self.retry_base_delay,
              "a non-negative number of seconds")
        check(self.retry_max_delay >= self.retry_base_delay, "llm.retry_max_delay",
              self.retry_max_delay, f"a number of seconds >= llm.retry_base_delay ({self.retry_base_delay})")
        check(self.retry_after_max >= 0, "llm.retry_after_max", self.retry_after_max, "a non-negative number of seconds")
        check(self.deadline > 0, "llm.deadline", self.deadline, "a positive number of seconds")
        check(self.batch_size >= 1, "llm.batch_size", self.batch_size, "an integer >= 1")
        check(bool(self.device), "llm.device", self.device, "'auto', 'cpu', 'cuda' or another torch device")
