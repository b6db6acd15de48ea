"""Embedders: the protocol and its backends (sentence-transformers, OpenAI), with a disk cache."""
from __future__ import annotations

from sirerag.embedding.base import Embedder

__all__ = ["Embedder"]
