"""What a search of the public API hands back: :class:`SearchResult`, one ranked pool entry with everything a
caller needs to show or read it (no further look-up in the pool), made from a retriever's hit by
:func:`make_result`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from sirerag.core.types import Document, Node, Pool
from sirerag.pool.titles import entry_title
from sirerag.retrievers.base import Hit


@dataclass(frozen=True)
class SearchResult:
    """One ranked pool entry.

    Attributes:
        entry_id: the pool entry's id.
        score: the retriever's score (comparable within one query).
        text: what the retriever ranked and a reader reads.
        title: a leaf's document title (a folder file's relative path); an aggregate's entity; a
            summary's most central children's titles, up to 3 joined by ``"; "``.
        tree: ``similarity`` or ``relatedness``.
        kind: ``leaf``, ``summary``, ``aggregate`` or ``proposition``.
        level: 0 for leaves and aggregates, 1.. for summaries.
        passages: ids of the source documents under the entry, in corpus order.
        section: a leaf's Markdown heading path (``"Install > Linux"``), else empty.
    """

    entry_id: str
    score: float
    text: str
    title: str
    tree: str
    kind: str
    level: int
    passages: tuple[str, ...]
    section: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.entry_id, "score": self.score, "title": self.title, "section": self.section,
                "tree": self.tree, "kind": self.kind, "level": self.level, "passages": list(self.passages),
                "text": self.text}


def make_result(hit: Hit, entry: Node, documents: Mapping[str, Document], pool: Pool | None = None) -> SearchResult:
    """The :class:`SearchResult` of a hit on ``entry``; ``documents`` by id give leaves their titles, and
    ``pool`` (the entry's) gives summaries theirs (:func:`sirerag.pool.titles.entry_title`)."""
    title, section = "", ""
    if entry.kind == "leaf" and entry.passages and entry.passages[0] in documents:
        doc = documents[entry.passages[0]]
        title, section = doc.title, doc.section
    elif entry.kind == "aggregate" and entry.entity:
        title = entry.entity
    elif entry.kind == "summary" and pool is not None:
        title = entry_title(pool, entry, documents)
    return SearchResult(entry_id=entry.id, score=float(hit.score), text=entry.text, title=title, tree=entry.tree,
                        kind=entry.kind, level=entry.level, passages=tuple(entry.passages), section=section)


def source_label(result: SearchResult) -> str:
    """``title > section (passage ID)`` of a leaf; ``kind of N passages (ID, ...)`` otherwise."""
    if result.kind == "leaf":
        name = " > ".join(p for p in (result.title, result.section) if p) or "(untitled)"
        return f"{name} (passage {', '.join(result.passages)})"
    shown = ", ".join(result.passages[:5]) + (", ..." if len(result.passages) > 5 else "")
    what = f"{result.kind} '{result.title}'" if result.title else result.kind
    return f"{what} over {len(result.passages)} passage(s) ({shown})"
