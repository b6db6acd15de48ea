"""OpenAI-compatible chat backend: OpenAI itself, vLLM, Ollama, llama.cpp's server.

Requests run on a thread pool with at most ``max_concurrency`` in flight. A
transient failure (HTTP 429, any 5xx, a timeout, a connection error) is retried
with exponential backoff and jitter, honouring ``Retry-After``; anything else
(other 4xx, a malformed reply) fails that item at once. A failure is returned or
raised, never stored as output.

The API key is read from the environment when the backend is created and kept
only in the client: it is never part of :attr:`spec`, a cache key, a log line or
an error message. The server URL is not part of the spec either: the model name
identifies the model, so the same model behind another URL reuses the cache.
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

from sirerag.config import LLMConfig
from sirerag.errors import ConfigError, require
from sirerag.llm.accounting import UsageLedger, completion_tokens, request_tokens
from sirerag.llm.base import Completion, LLMCallError, LLMRequest, StreamingLLM, TransientLLMError

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
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(f"LLM server URL must look like http://HOST:PORT/v1, got {_redact_url(base_url)!r}")
        key = os.environ.get(config.api_key_env) or None
        if key is None and base_url is None:
            raise ConfigError(
                f"openai:{model} calls the paid OpenAI API and needs a key in the environment variable "
                f"{config.api_key_env} (llm.api_key_env); for a local server use openai:{model}@http://HOST:PORT/v1")
        self.model = model
        self.config = config
        self.usage = UsageLedger()
        self._secrets = [(secret, "***") for secret in (key, _userinfo(base_url)) if secret]
        if base_url:
            self._secrets.insert(0, (base_url.rstrip("/"), _redact_url(base_url).rstrip("/")))
        self._openai = openai
        self._client = openai.OpenAI(api_key=key or NO_KEY, base_url=base_url, timeout=float(config.timeout),
                                     max_retries=0)
        # OpenAI's current models take max_completion_tokens; compatible servers know max_tokens
        self._budget_param = "max_completion_tokens" if base_url is None else "max_tokens"
        self._random = random.Random()
        self._random_lock = threading.Lock()
        self.endpoint = _redact_url(base_url) if base_url else "the OpenAI API"
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
        attempt = 0
        while True:
            try:
                return self._call(request)
            except TransientLLMError as exc:
                if attempt >= self.config.max_retries:
                    raise TransientLLMError(f"{exc} (gave up after {attempt + 1} attempts)") from None
                delay = self._backoff(attempt, getattr(exc, "retry_after", None))
                logger.warning("%s; retry %d/%d in %.2fs", exc, attempt + 1, self.config.max_retries, delay)
                time.sleep(delay)
                attempt += 1

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = min(self.config.retry_max_delay, self.config.retry_base_delay * (2 ** attempt))
        with self._random_lock:
            delay = cap / 2 + self._random.uniform(0, cap / 2)  # "equal jitter"
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.config.retry_max_delay))
        return delay

    def _call(self, request: LLMRequest) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.as_openai(),
            self._budget_param: request.max_tokens,
            "temperature": float(request.temperature),
        }
        if request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            response = self._client.chat.completions.create(**kwargs)
        except self._openai.APIError as exc:
            raise self._classify(exc) from None
        try:
            choice = response.choices[0]
            text = choice.message.content or ""
            finish = choice.finish_reason or ""
        except (AttributeError, IndexError, TypeError) as exc:
            raise LLMCallError(f"{self._label}: malformed reply from the server ({exc})") from None
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        output = getattr(usage, "completion_tokens", None) if usage is not None else None
        return Completion(
            text=text,
            prompt_tokens=int(prompt) if prompt is not None else request_tokens(request),
            completion_tokens=int(output) if output is not None else completion_tokens(text),
            finish_reason=str(finish),
        )

    def _classify(self, exc: Exception) -> LLMCallError:
        """Map an OpenAI client error to a transient or permanent :class:`LLMCallError`."""
        openai = self._openai
        message = self._scrub(str(exc))
        if isinstance(exc, openai.APITimeoutError):
            return TransientLLMError(f"{self._label}: request timed out after {self.config.timeout}s")
        if isinstance(exc, openai.APIConnectionError):
            return TransientLLMError(f"{self._label}: connection error: {message}")
        status = getattr(exc, "status_code", None)
        if isinstance(exc, openai.APIStatusError) and status is not None:
            if status == 429 or status >= 500:
                err = TransientLLMError(f"{self._label}: HTTP {status}: {message}")
                err.retry_after = _retry_after(exc)  # type: ignore[attr-defined]
                return err
            return LLMCallError(f"{self._label}: HTTP {status} (not retried): {message}")
        return LLMCallError(f"{self._label}: {type(exc).__name__}: {message}")

    def _scrub(self, text: str) -> str:
        """``text`` without the key, the URL's credentials or the raw URL (shown redacted)."""
        for secret, shown in self._secrets:
            text = text.replace(secret, shown)
        return text


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _userinfo(url: str | None) -> str:
    """The ``user:password`` part of a URL, if any (scrubbed from messages)."""
    netloc = urlsplit(url).netloc if url else ""
    return netloc.rpartition("@")[0] if "@" in netloc else ""


def _redact_url(url: str) -> str:
    """``scheme://host:port/path`` without credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
