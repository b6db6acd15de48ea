"""Embeddings through the OpenAI API or an OpenAI-compatible server (extra ``openai``).

The key is read only from the environment (``OPENAI_API_KEY``); it is never part
of the spec, a log line, an error or a cache key. Requests are batched; transient
failures (HTTP 408/429/5xx, timeouts, dropped connections) are retried by
:func:`sirerag.llm.http.call_with_retries` (the same policy as the chat backend),
other errors are raised at once.
"""
from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from sirerag.embedding.base import l2_normalize
from sirerag.core.errors import ConfigError, SireragError, require
from sirerag.llm.http import RequestFailed, RetryPolicy, call_with_retries, check_server_url, public_url

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"  # the SiReRAG paper's embedder
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"


class OpenAIEmbedder:
    """Embeddings from ``/v1/embeddings``.

    Args:
        model: embedding model name.
        base_url: an OpenAI-compatible server; default ``$OPENAI_BASE_URL`` or OpenAI's API.
        batch_size: texts per request (OpenAI accepts up to 2048).
        max_retries: retries of a transient failure before giving up.
        timeout: seconds per request.
        retry_base_delay: first backoff delay in seconds (doubled each retry, with jitter).
        retry_max_delay: longest wait between two attempts, ``Retry-After`` included.
        show_progress: show a progress bar over the requests.

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        ConfigError: ``OPENAI_API_KEY`` is not set and no base URL is given.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str | None = None, batch_size: int = 64,
                 max_retries: int = 5, timeout: float = 60.0, retry_base_delay: float = 1.0,
                 retry_max_delay: float = 60.0, show_progress: bool = True) -> None:
        openai = require("openai", "openai", purpose="OpenAI embeddings")
        base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        if base_url is not None:
            check_server_url(base_url)
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
        self.timeout = timeout
        self._policy = RetryPolicy(max_retries, retry_base_delay, retry_max_delay)
        self._secret = None if key == "unused" else key
        self._client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)
        self._dim: int | None = KNOWN_DIMS.get(model) if base_url is None else None
        self._spec = f"openai:{model}" + (f"@{public_url(base_url)}" if base_url else "")

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
        try:
            response = call_with_retries(lambda: self._client.embeddings.create(model=self.model, input=batch),
                                         self._policy, label=self._spec, timeout=self.timeout, secret=self._secret)
        except RequestFailed as exc:
            raise SireragError(f"{self._spec}: embeddings request failed: {exc}") from None
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(batch):
            raise SireragError(f"{self._spec}: asked for {len(batch)} embeddings, got {len(data)}")
        return np.asarray([d.embedding for d in data], dtype=np.float32)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(spec={self._spec!r}, batch_size={self.batch_size})"

