"""The retriever protocol: index a pool once, search it many times."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class Hit:
    """One ranked pool entry."""

    entry_id: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Ranks the entries of one pool for a query, best first."""

    name: str

    def search(self, query: str, k: int = 10) -> list[Hit]: ...

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]: ...
