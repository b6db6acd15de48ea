"""The network layer shared by the OpenAI-compatible chat backend and the OpenAI embedder.

One rule for each concern:

* :func:`split_openai_spec` reads the part of a spec after ``openai:``: ``MODEL`` or
  ``MODEL@http(s)://HOST[:PORT]/PATH``;
* :func:`public_url` is the form of a server URL that may be logged or put in a spec
  (no user info, query or fragment);
* :func:`call_with_retries` runs one request with the openai client's own retries off:
  timeouts, dropped connections and HTTP 408/429/5xx are retried with exponential
  backoff and equal jitter (tenacity), honouring ``Retry-After`` up to the maximum delay;
  a reply that is not what the API answers (:class:`BadReply`) is retried the same way;
  any other error fails at once. A failure becomes :class:`RequestFailed` with a one-line
  message that never contains the API key.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sirerag.core.errors import ConfigError, require

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth retrying besides 5xx (request timeout, rate limit)
TRANSIENT_STATUS = frozenset({408, 429})
_URL_MARKERS = ("@http://", "@https://")


def split_openai_spec(rest: str, *, default_model: str | None = None) -> tuple[str, str | None]:
    """``MODEL`` or ``MODEL@http(s)://HOST:PORT/PATH`` (the part after ``openai:``) -> ``(model, url or None)``.

    Only ``@http://`` or ``@https://`` starts the URL, so a model name may contain ``@``.

    Raises:
        ConfigError: no model name and no ``default_model``, or a URL without a host.
    """
    model, url = rest.strip(), None
    for marker in _URL_MARKERS:
        if marker in model:
            model, _, tail = model.partition(marker)
            url = marker[1:] + tail
            break
    model = model.strip() or (default_model or "")
    if not model:
        raise ConfigError(f"an openai: spec needs a model name, e.g. openai:gpt-4o-mini or "
                          f"openai:MODEL@http://HOST:PORT/v1; got openai:{rest!r}")
    if url is not None:
        check_server_url(url)
    return model, url


def check_server_url(url: str) -> None:
    """Raise :class:`ConfigError` unless ``url`` is ``http(s)://HOST[:PORT][/PATH]``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"server URL must look like http://HOST:PORT/v1, got {public_url(url)!r}")


def public_url(url: str) -> str:
    """``scheme://host:port/path`` without user info, query, fragment or trailing slash."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:  # a malformed port: leave it out
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: ``base_delay * 2**attempt`` capped at ``max_delay``,
    with equal jitter (half fixed, half random), at least ``Retry-After`` (also capped)."""

    max_retries: int
    base_delay: float
    max_delay: float

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        cap = min(self.max_delay, self.base_delay * (2 ** attempt))
        delay = cap / 2 + _random.uniform(0, cap / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay))
        return delay


_random = random.Random()  # private: never seeds or draws from the global generator


class BadReply(Exception):
    """The server answered 2xx with a body that is not what the API answers (not JSON, no
    ``choices``, content that is not a string, over the byte cap): retried like a 5xx, never used."""


class RequestFailed(Exception):
    """A request failed for good. ``transient``: retries ran out (else the error was not retryable)."""

    def __init__(self, message: str, *, transient: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status


def is_transient(exc: BaseException) -> bool:
    """Whether an openai client error is worth retrying (timeout, connection, 408/429/5xx)."""
    if isinstance(exc, BadReply):
        return True
    openai = require("openai", "openai", purpose="OpenAI-compatible servers")
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in TRANSIENT_STATUS or exc.status_code >= 500
    return False


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds from the ``Retry-After`` header of an HTTP error (None if absent or a date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def describe(exc: BaseException, *, timeout: float | None = None, secret: str | None = None) -> str:
    """One line about an openai client error, with ``secret`` replaced by ``***``."""
    openai = require("openai", "openai", purpose="OpenAI-compatible servers")
    message = str(exc).replace(secret, "***") if secret else str(exc)
    if isinstance(exc, BadReply):
        return f"malformed reply: {message}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out" + (f" after {timeout:g}s" if timeout else "")
    if isinstance(exc, openai.APIConnectionError):
        return f"connection error: {message}"
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.APIStatusError) and status is not None:
        return f"HTTP {status}" + ("" if is_transient(exc) else " (not retried)") + f": {message}"
    return f"{type(exc).__name__}: {message}"


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, label: str, timeout: float | None = None,
                      secret: str | None = None) -> T:
    """Call ``fn`` (one request through an openai client), retrying transient failures.

    Errors that are not openai client errors (e.g. a malformed reply found by ``fn``)
    pass through unchanged.

    Raises:
        RequestFailed: a client error that was not retryable, or still failing after
            ``policy.max_retries`` retries (its message says after how many attempts).
    """
    tenacity = require("tenacity", "openai", purpose="retrying requests to OpenAI-compatible servers")
    openai = require("openai", "openai", purpose="OpenAI-compatible servers")

    def wait(state: Any) -> float:
        return policy.delay(state.attempt_number - 1, retry_after(state.outcome.exception()))

    def before_sleep(state: Any) -> None:
        logger.warning("%s: %s; retry %d/%d in %.2fs", label,
                       describe(state.outcome.exception(), timeout=timeout, secret=secret),
                       state.attempt_number, policy.max_retries, state.next_action.sleep)

    retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(policy.max_retries + 1), wait=wait,
                                 retry=tenacity.retry_if_exception(is_transient), before_sleep=before_sleep,
                                 reraise=True)
    try:
        return retrying(fn)
    except (openai.APIError, BadReply) as exc:
        transient = is_transient(exc)
        message = describe(exc, timeout=timeout, secret=secret)
        if transient:
            message += f" (gave up after {policy.max_retries + 1} attempts)"
        # not chained: the client's error may quote request headers
        raise RequestFailed(message, transient=transient, status=getattr(exc, "status_code", None)) from None
