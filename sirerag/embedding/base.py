"""The embedder protocol: queries and documents are encoded separately.

Retrieval models often treat the two sides differently (instructions or
prefixes on queries), so the protocol keeps them apart even where a backend
encodes both the same way.
"""
from __future__ import annotations

import os
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows of width ``dim``.

    ``spec`` names backend and model (e.g. ``st:all-MiniLM-L6-v2``); it is stored in
    the index manifest and is part of every embedding cache key.
    """

    @property
    def spec(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class TokenWindow(Protocol):
    """An embedder that reads at most ``max_input_tokens`` tokens of a text (special tokens included)
    and cuts the rest, and can count a text's tokens before the cut."""

    @property
    def max_input_tokens(self) -> int: ...

    def count_input_tokens(self, texts: Sequence[str]) -> list[int]: ...


def token_window(embedder: object) -> TokenWindow | None:
    """The :class:`TokenWindow` behind ``embedder`` (itself, or what a wrapper's ``inner`` holds), or None
    when the backend does not tell (an API embedder)."""
    seen: set[int] = set()
    while embedder is not None and id(embedder) not in seen:
        if isinstance(embedder, TokenWindow):
            return embedder
        seen.add(id(embedder))
        embedder = getattr(embedder, "inner", None)
    return None


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Row-normalise to unit length in float32 (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def normalize_in_place(matrix: np.ndarray) -> np.ndarray:
    """:func:`l2_normalize` of a float32 matrix, written over it (the same values, no copy); returns it."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.divide(matrix, norms, out=matrix)


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity where the platform tells it, else the CPU count)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0)) if affinity is not None else os.cpu_count() or 1)
