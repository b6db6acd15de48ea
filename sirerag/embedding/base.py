"""The embedder protocol: queries and documents are encoded separately.

Retrieval models often treat the two sides differently (instructions or
prefixes on queries), so the protocol keeps them apart even where a backend
encodes both the same way.
"""
from __future__ import annotations

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


def l2_normalize(matrix: np.ndarray) -> np.ndarray:
    """Row-normalise to unit length in float32 (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms
