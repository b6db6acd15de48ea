"""The network layer shared by the OpenAI-compatible chat backend and the OpenAI embedder.

One rule for each concern:

* :func:`split_openai_spec` reads the part of a spec after ``openai:``: ``MODEL`` (OpenAI's API, the only
  form that reaches it) or ``MODEL@http(s)://HOST[:PORT]/PATH``; a model name that reads as an address
  and a URL that is not http(s) are refused;
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
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sirerag.core.errors import ConfigError, require

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth retrying besides 5xx (request timeout, rate limit)
TRANSIENT_STATUS = frozenset({408, 429})
#: a model name that reads as an address: HOST:PORT[/PATH], or localhost, an IP or a dotted host name
#: followed by a path (``openai:x@localhost:8000/v1`` without its ``http://`` would otherwise be a model of OpenAI's)
_HOST_PORT = re.compile(r"^[^/\s]*:\d{1,5}(/|$)")
_HOST_PATH = re.compile(r"^(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]*\])(/|$)|^([A-Za-z0-9-]+\.)+[A-Za-z]{2,}/",
                        re.IGNORECASE)
_EXAMPLE = "openai:MODEL for OpenAI's API, openai:MODEL@http://HOST:PORT/v1 for another server"


def split_openai_spec(rest: str, *, default_model: str | None = None,
                      option: str = "openai spec") -> tuple[str, str | None]:
    """``MODEL`` or ``MODEL@http(s)://HOST:PORT/PATH`` (the part after ``openai:``) -> ``(model, url or None)``.

    The first ``@`` starts the server URL, which must be ``http://`` or ``https://`` with a host. A model
    name that holds ``://`` or reads as an address (``HOST:PORT``, ``localhost/v1``, ``10.0.0.1``,
    ``api.example.com/v1``) is refused: only a spec that names no address at all goes to OpenAI's API
    (or ``OPENAI_BASE_URL``), so a URL typo never sends requests there. ``option`` names the setting in
    errors (``--llm``, ``embedder.spec``...).

    Raises:
        ConfigError: no model name and no ``default_model``, a model name that reads as an address, or a
            URL that is not ``http(s)://HOST[:PORT][/PATH]``.
    """
    model, at, url = rest.strip().partition("@")
    model = model.strip() or (default_model or "")
    where = f"{option} openai:{rest.partition('@')[0].strip()}" + (f"@{_shown_url(url.strip())}" if at else "")
    if not model:
        raise ConfigError(f"{where}: no model name; use {_EXAMPLE}")
    if "://" in model or _HOST_PORT.match(model) or _HOST_PATH.match(model):
        raise ConfigError(f"{where}: {model!r} reads as a server address, not a model name; a server is named "
                          f"after '@' with http:// or https://, e.g. openai:MODEL@http://HOST:PORT/v1")
    if not at:
        return model, None
    url = url.strip()
    check_server_url(url, where=where)
    return model, url


def check_server_url(url: str, *, where: str = "server URL") -> None:
    """Raise :class:`ConfigError` (naming ``where``) unless ``url`` is ``http(s)://HOST[:PORT][/PATH]``."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - a malformed port raises
    except ValueError:
        parts = urlsplit("")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: the server URL must be http:// or https:// with a host, e.g. "
                          f"http://HOST:PORT/v1; got {_shown_url(url)!r}")


def _shown_url(url: str) -> str:
    """``url`` as an error may show it: without user info (a key), query or fragment."""
    return public_url(url) if "://" in url else url.rpartition("@")[2]


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
    with equal jitter (half fixed, half random), at least ``Retry-After`` (capped at
    ``retry_after_max`` and ``max_delay``)."""

    max_retries: int
    base_delay: float
    max_delay: float
    retry_after_max: float | None = None

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        cap = min(self.max_delay, self.base_delay * (2 ** attempt))
        delay = cap / 2 + _random.uniform(0, cap / 2)
        if retry_after is not None:
            honoured = min(retry_after, self.max_delay)
            if self.retry_after_max is not None:
                honoured = min(honoured, self.retry_after_max)
            delay = max(delay, honoured)
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


def attempt_timeout(timeout: float, deadline: float | None) -> float:
    """The seconds one attempt may wait: ``timeout``, or less when ``deadline`` (monotonic) comes sooner."""
    if deadline is None:
        return timeout
    return max(0.05, min(timeout, deadline - time.monotonic()))


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
                      secret: str | None = None, deadline: float | None = None) -> T:
    """Call ``fn`` (one request through an openai client), retrying transient failures.

    Errors that are not openai client errors (e.g. a malformed reply found by ``fn``)
    pass through unchanged. With ``deadline`` (a :func:`time.monotonic` time), no retry waits past it
    (``fn`` bounds each attempt's own wait, :func:`attempt_timeout`).

    Raises:
        RequestFailed: a client error that was not retryable, or still failing after
            ``policy.max_retries`` retries or at the deadline (its message says after how many attempts).
    """
    tenacity = require("tenacity", "openai", purpose="retrying requests to OpenAI-compatible servers")
    openai = require("openai", "openai", purpose="OpenAI-compatible servers")

    def wait(state: Any) -> float:
        return policy.delay(state.attempt_number - 1, retry_after(state.outcome.exception()))

    def before_sleep(state: Any) -> None:
        logger.warning("%s: %s; retry %d/%d in %.2fs", label,
                       describe(state.outcome.exception(), timeout=timeout, secret=secret),
                       state.attempt_number, policy.max_retries, state.next_action.sleep)

    def past_deadline(state: Any) -> bool:
        return deadline is not None and time.monotonic() + state.upcoming_sleep >= deadline

    stop = tenacity.stop_after_attempt(policy.max_retries + 1) | past_deadline
    retrying = tenacity.Retrying(stop=stop, wait=wait,
                                 retry=tenacity.retry_if_exception(is_transient), before_sleep=before_sleep,
                                 reraise=True)
    try:
        return retrying(fn)
    except (openai.APIError, BadReply) as exc:
        transient = is_transient(exc)
        message = describe(exc, timeout=timeout, secret=secret)
        if transient:
            attempts = retrying.statistics.get("attempt_number", policy.max_retries + 1)
            at_deadline = deadline is not None and attempts < policy.max_retries + 1
            message += f" (gave up after {attempts} attempt{'s' if attempts != 1 else ''}" \
                       f"{' at the deadline' if at_deadline else ''})"
        # not chained: the client's error may quote request headers
        raise RequestFailed(message, transient=transient, status=getattr(exc, "status_code", None)) from None
