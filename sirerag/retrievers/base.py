"""The retriever protocol: index a pool once, search it many times."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

from sirerag.core.errors import InputError


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


class Closing:
    """``close()`` and the context-manager protocol of a retriever: ``with load_retriever(...) as r:``.

    ``close`` releases what the retriever holds (a worker process, the retrievers it wraps or
    fuses, named by :meth:`owned`); closing twice is harmless.
    """

    def owned(self) -> Sequence[Any]:
        """The retrievers (or other closable objects) this one owns."""
        return ()

    def close(self) -> None:
        for part in self.owned():
            close = getattr(part, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_query(queries: str | Sequence[str]) -> None:
    """Raise :class:`InputError` unless ``queries`` (one query or a sequence of them) are
    strings holding more than white space."""
    items = [queries] if isinstance(queries, str) else list(queries)
    for position, query in enumerate(items, start=1):
        if not isinstance(query, str) or not query.strip():
            which = "" if isinstance(queries, str) else f" {position}"
            raise InputError(f"query{which} must be a question or keywords, got {query!r}")
