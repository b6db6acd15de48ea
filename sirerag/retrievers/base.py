"""The retriever protocol: index a pool once, search it many times."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from sirerag.errors import InputError


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



def check_query(queries: str | Sequence[str]) -> None:
    """Raise :class:`InputError` unless ``queries`` (one query or a sequence of them) are
    strings holding more than white space."""
    items = [queries] if isinstance(queries, str) else list(queries)
    for position, query in enumerate(items, start=1):
        if not isinstance(query, str) or not query.strip():
            which = "" if isinstance(queries, str) else f" {position}"
            raise InputError(f"query{which} must be a question or keywords, got {query!r}")
