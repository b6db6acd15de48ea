"""Display titles of pool entries: what a search result shows as its ``title``.

A leaf's title is its document's; an aggregate's, the entity its propositions share; a proposition's, its
document's. A summary's title is made of its most central children's titles: its children are ranked by
cosine with their centroid (the centre of the cluster the summary was written for), and the first title of
each (a leaf's document title, an aggregate's entity, a child summary's own first title) is kept, without
repeats, up to :data:`SUMMARY_TITLES`, joined by ``"; "``.

Titles are derived from what an index already holds (entries, their embeddings, the documents) when a result
is shown, and stored nowhere: no retriever reads them, so they change no ranking, and indexes built before
titles existed get them too.
"""
from __future__ import annotations

import weakref
from typing import Mapping

import numpy as np

from sirerag.core.types import Document, Node, Pool

#: at most this many child titles make a summary's title
SUMMARY_TITLES = 3
SEPARATOR = "; "

_CACHE: "weakref.WeakKeyDictionary[Pool, dict[str, tuple[str, ...]]]" = weakref.WeakKeyDictionary()


def entry_title(pool: Pool, entry: Node, documents: Mapping[str, Document]) -> str:
    """The title shown for ``entry`` of ``pool`` (empty when nothing names it)."""
    return SEPARATOR.join(entry_titles(pool, entry, documents))


def entry_titles(pool: Pool, entry: Node, documents: Mapping[str, Document]) -> tuple[str, ...]:
    """The parts of :func:`entry_title`, most central first (one part except for summaries)."""
    if entry.kind == "aggregate":
        return (entry.entity,) if entry.entity else ()
    if entry.kind != "summary":
        doc = documents.get(entry.passages[0]) if entry.passages else None
        return (doc.title,) if doc is not None and doc.title else ()
    cache = _CACHE.setdefault(pool, {})
    if entry.id not in cache:
        cache[entry.id] = _summary_titles(pool, entry, documents)
    return cache[entry.id]


def _summary_titles(pool: Pool, entry: Node, documents: Mapping[str, Document]) -> tuple[str, ...]:
    positions = []
    for child in entry.children:
        try:
            positions.append(pool.position(child))
        except KeyError:  # a child left out of the pool (an ablation's pool)
            continue
    if not positions:
        return ()
    children = [pool.entries[p] for p in positions]
    rows = pool.embeddings[positions].astype(np.float64)
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    cosines = np.round(rows @ rows.mean(axis=0), 6)  # (a positive factor from cosine); rounded so ties are ties
    order = np.argsort(-cosines, kind="stable")  # ties keep the children's order
    titles: list[str] = []
    for i in order:
        first = entry_titles(pool, children[int(i)], documents)[:1]
        if first and first[0] not in titles:
            titles.append(first[0])
            if len(titles) == SUMMARY_TITLES:
                break
    return tuple(titles)
