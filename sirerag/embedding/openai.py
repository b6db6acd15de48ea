"""Embeddings through the OpenAI API or an OpenAI-compatible server (extra ``openai``).

The key is read only from the environment (``OPENAI_API_KEY``); it is never part
of the spec, a log line or a cache key. Requests are batched; transient failures
(HTTP 408/429/5xx, timeouts, dropped connections) are retried with exponential
backoff, other errors are raised at once.
"""
from __future__ import annotations

import logging
import os
import random
import time
from typing import Any, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from sirerag.embedding.base import l2_normalize
from sirerag.errors import ConfigError, SireragError, require

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"  # the SiReRAG paper's embedder
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
_TRANSIENT_STATUS = {408, 429}
_MAX_DELAY = 60.0


def parse_openai_spec(rest: str) -> tuple[str, str | None]:
    """``MODEL`` or ``MODEL@URL`` (the part after ``openai:``) -> ``(model, url or None)``."""
    model, _, url = rest.partition("@")
    return model.strip() or DEFAULT_MODEL, url.strip() or None


def _public_url(url: str) -> str:
    """The URL without user info, query or fragment (safe to log and to put in a spec)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class OpenAIEmbedder:
    """Embeddings from ``/v1/embeddings``.

    Args:
        model: embedding model name.
        base_url: an OpenAI-compatible server; default ``$OPENAI_BASE_URL`` or OpenAI's API.
        batch_size: texts per request (OpenAI accepts up to 2048).
        max_retries: retries of a transient failure before giving up.
        timeout: seconds per request.
        retry_base_delay: first backoff delay in seconds (doubled each retry, with jitter).
        show_progress: show a progress bar over the requests.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        ConfigError: ``OPENAI_API_KEY`` is not set and no base URL is given.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str | None = None, batch_size: int = 64,
                 max_retries: int = 5, timeout: float = 60.0, retry_base_delay: float = 1.0,
                 show_progress: bool = True) -> None:
        openai = require("openai", "openai", purpose="OpenAI embeddings")
        base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = os.environ.get(KEY_ENV)
        if not key:
            if base_url is None:
                raise ConfigError(f"the embedder openai:{model} needs an API key in the environment variable "
                                  f"{KEY_ENV}, which is not set")
            key = "unused"  # OpenAI-compatible local servers usually accept any key
        self.model = model
        self.base_url = base_url
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.show_progress = show_progress
        self._openai = openai
        self._client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        self._dim: int | None = KNOWN_DIMS.get(model) if base_url is None else None
        self._spec = f"openai:{model}" + (f"@{_public_url(base_url)}" if base_url else "")
        self._rng = random.Random()

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        from tqdm.auto import tqdm

        # the API refuses empty strings; a blank text is sent as one space
        texts = [t if t.strip() else " " for t in texts]
        starts = range(0, len(texts), self.batch_size)
        rows = [self._request(texts[s:s + self.batch_size])
                for s in tqdm(starts, desc="embedding (openai)", unit="request",
                              disable=not self.show_progress or len(starts) < 2)]
        matrix = np.vstack(rows)
        self._dim = int(matrix.shape[1])
        return l2_normalize(matrix)

    def _request(self, batch: list[str]) -> np.ndarray:
        for attempt in range(self.max_retries + 1):
            try:
                response = self._client.embeddings.create(model=self.model, input=batch)
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised unless transient
                if not self._transient(exc) or attempt == self.max_retries:
                    raise SireragError(f"{self._spec}: embeddings request failed: {_describe(exc)}") from exc
                delay = self._delay(exc, attempt)
                logger.warning("%s: %s; retry %d/%d in %.1fs", self._spec, _describe(exc), attempt + 1,
                               self.max_retries, delay)
                time.sleep(delay)
                continue
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise SireragError(f"{self._spec}: asked for {len(batch)} embeddings, got {len(data)}")
            return np.asarray([d.embedding for d in data], dtype=np.float32)
        raise AssertionError("unreachable")  # pragma: no cover

    def _transient(self, exc: BaseException) -> bool:
        o = self._openai
        if isinstance(exc, (o.APITimeoutError, o.APIConnectionError)):
            return True
        if isinstance(exc, o.APIStatusError):
            return exc.status_code in _TRANSIENT_STATUS or exc.status_code >= 500
        return False

    def _delay(self, exc: BaseException, attempt: int) -> float:
        delay = self.retry_base_delay * (2 ** attempt) * (0.5 + self._rng.random())
        response: Any = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass
        return min(delay, _MAX_DELAY)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(spec={self._spec!r}, batch_size={self.batch_size})"


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"HTTP {status}: {exc}" if status else f"{type(exc).__name__}: {exc}"
