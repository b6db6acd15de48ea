"""OpenAI-compatible chat backend: OpenAI itself, vLLM, Ollama, llama.cpp's server.

Requests run on a thread pool with at most ``max_concurrency`` in flight. A
transient failure (HTTP 408, 429, any 5xx, a timeout, a connection error) is retried
by :func:`sirerag.llm.http.call_with_retries` (the same policy as the OpenAI
embedder), and so is a 2xx reply that is not what the API answers (not JSON, no
``choices``, content that is not a string, more bytes than ``max_tokens`` allows:
:mod:`sirerag.llm.reply`); anything else (other 4xx) fails that item at once. A server's
``Retry-After`` is honoured up to ``llm.retry_after_max`` seconds, and one call with its retries
ends within ``llm.deadline`` seconds.
A failure is returned or raised, never stored as output.

The API key is read from the environment when the backend is created and kept
only in the client: it is never part of :attr:`spec`, a cache key, a log line or
an error message. The server URL is not part of the spec either: the model name
identifies the model, so the same model behind another URL reuses the cache.
"""
from __future__ import annotations

import logging
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Iterator, Sequence

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError, require
from sirerag.llm.accounting import UsageLedger
from sirerag.llm.base import Completion, LLMCallError, LLMRequest, StreamingLLM, TransientLLMError
from sirerag.llm.http import (RequestFailed, RetryPolicy, attempt_timeout, call_with_retries, check_server_url,
                              public_url)
from sirerag.llm.reply import parse_completion, read_capped, reply_cap

logger = logging.getLogger(__name__)

#: Placeholder key for local servers that do not check one (the client insists on a value).
NO_KEY = "sk-no-key-required"


class OpenAIChatLLM(StreamingLLM):
    """Chat completions over the OpenAI API or any server that speaks it.

    Args:
        model: model name sent with every request (e.g. ``gpt-4o-mini``; for a local
            server, the name it serves or any label).
        config: concurrency, retries, timeout and the environment variable names.
        base_url: server URL such as ``http://127.0.0.1:8000/v1``; None reads
            ``config.base_url_env`` and otherwise uses OpenAI.

    Raises:
        ConfigError: OpenAI itself is the target and no key is set.
        MissingExtraError: the ``openai`` package is not installed.
    """

    def __init__(self, model: str, *, config: LLMConfig, base_url: str | None = None) -> None:
        openai = require("openai", "openai", purpose="the openai: LLM backend")
        if not model:
            raise ConfigError("openai: spec needs a model name, e.g. openai:gpt-4o-mini")
        base_url = base_url or os.environ.get(config.base_url_env) or None
        if base_url is not None:
            check_server_url(base_url)
        key = os.environ.get(config.api_key_env) or None
        if key is None and base_url is None:
            raise ConfigError(
                f"openai:{model} calls the paid OpenAI API and needs a key in the environment variable "
                f"{config.api_key_env} (llm.api_key_env); for a local server use openai:{model}@http://HOST:PORT/v1")
        self.model = model
        self.config = config
        self.usage = UsageLedger()
        self._secret = key
        self._client = openai.OpenAI(api_key=key or NO_KEY, base_url=base_url, timeout=float(config.timeout),
                                     max_retries=0)
        # OpenAI's current models take max_completion_tokens; compatible servers know max_tokens
        self._budget_param = "max_completion_tokens" if base_url is None else "max_tokens"
        self._policy = RetryPolicy(config.max_retries, float(config.retry_base_delay), float(config.retry_max_delay),
                                   float(config.retry_after_max))
        #: where requests go, without credentials; errors name it (``openai:MODEL at URL``)
        self.endpoint = public_url(base_url) if base_url else "the OpenAI API"
        self._label = f"{self.spec} at {self.endpoint}"
        logger.info("LLM %s via %s (%d in flight, %d retries)", self.spec, self.endpoint, config.max_concurrency,
                    config.max_retries)

    @property
    def spec(self) -> str:
        return f"openai:{self.model}"

    def iter_complete(self, requests: Sequence[LLMRequest]) -> Iterator[tuple[int, Completion | LLMCallError]]:
        """Yield ``(position, Completion or LLMCallError)`` as requests finish."""
        if not requests:
            return
        if len(requests) == 1:
            yield 0, self._complete_or_error(requests[0])
            return
        executor = ThreadPoolExecutor(max_workers=min(self.config.max_concurrency, len(requests)),
                                      thread_name_prefix="sirerag-llm")
        try:
            futures: dict[Future, int] = {executor.submit(self._complete_or_error, r): i
                                          for i, r in enumerate(requests)}
            remaining = set(futures)
            while remaining:
                done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                for future in done:
                    yield futures[future], future.result()
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    def _complete_or_error(self, request: LLMRequest) -> Completion | LLMCallError:
        try:
            completion = self._complete_with_retries(request)
        except LLMCallError as exc:
            self.usage.record_failure(request)
            return exc
        self.usage.record(request, completion)
        return completion

    def _complete_with_retries(self, request: LLMRequest) -> Completion:
        deadline = time.monotonic() + float(self.config.deadline)
        try:
            return call_with_retries(lambda: self._call(request, deadline), self._policy, label=self._label,
                                     timeout=float(self.config.timeout), secret=self._secret, deadline=deadline)
        except RequestFailed as exc:
            raise (TransientLLMError if exc.transient else LLMCallError)(f"{self._label}: {exc}") from None

    def _call(self, request: LLMRequest, deadline: float) -> Completion:
        kwargs: dict[str, Any] = {
            "timeout": attempt_timeout(float(self.config.timeout), deadline),
            "model": self.model,
            "messages": request.as_openai(),
            self._budget_param: request.max_tokens,
            "temperature": float(request.temperature),
        }
        if request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        # read as a stream up to a cap that follows max_tokens, then checked: a bad body is retried, never used
        with self._client.chat.completions.with_streaming_response.create(**kwargs) as response:
            body = read_capped(response.iter_bytes(), reply_cap(request.max_tokens))
        return parse_completion(body, request)
