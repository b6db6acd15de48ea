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

    def close(self) -> None:
        """Release what the retriever holds (a worker process, the retrievers it fuses); twice is harmless."""

    def __enter__(self) -> Any:  # the retriever itself (typing.Self needs Python 3.11)
        ...

    def __exit__(self, *exc: object) -> None: ...


class SearchOne:
    """``search`` of a retriever as its ``search_many`` over one query (batched retrievers share this)."""

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        raise NotImplementedError


class Closing:
    """``close()`` and the context-manager protocol of a retriever: ``with load_retriever(...) as r:``.

    ``close`` releases what the retriever holds (a worker process, the retrievers it wraps or
    fuses, named by :meth:`owned`); closing twice is harmless.
    """

    def owned(self) -> Sequence[object]:
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


def check_query(queries: object, *, batch: bool | None = None, max_chars: int | None = None,
                name: str = "query", limit: str = "query.max_chars") -> None:
    """Raise unless ``queries`` (one query, or a list or tuple of them) are strings holding more than white
    space and, with ``max_chars``, no longer than that. ``batch``: True for a list of queries (a string is
    refused), False for one query, None to tell by the type. ``name``: one query's name in messages;
    ``limit``: the setting ``max_chars`` comes from, named in the message.

    Raises:
        TypeError: a query that is not a ``str`` (bytes included), or a batch that is a string or no list.
        InputError: a blank query, or one over ``max_chars`` characters.
    """
    if batch is None:
        batch = not isinstance(queries, str)
    items: list[object] = [queries]
    if batch:
        if not isinstance(queries, (list, tuple)):
            hint = ": search() takes one query (or pass [query])" if isinstance(queries, (str, bytes)) else ""
            raise TypeError(f"queries must be a list of str, got {type_name(queries)}{hint}")
        items = list(queries)
    for position, query in enumerate(items, start=1):
        which = f"query {position}" if batch else name
        if not isinstance(query, str):
            decode = ": decode it first (.decode('utf-8'))" if isinstance(query, (bytes, bytearray)) else ""
            raise TypeError(f"{which} must be a str (a question or keywords), got {type_name(query)}{decode}")
        if not query.strip():
            raise InputError(f"{which} must be a question or keywords, got {query!r}")
        if max_chars is not None and len(query) > max_chars:
            raise InputError(f"{which} is {len(query):,} characters long, over the limit of {max_chars:,} "
                             f"({limit})")


def type_name(value: object) -> str:
    """``None`` or the name of ``value``'s type, for messages (``got int``, ``got bytes``)."""
    return "None" if value is None else type(value).__name__
