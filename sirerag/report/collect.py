"""The data of an inspection report, read from an index directory.

Everything the page shows is gathered here into plain lists (no corpus text is
escaped here: :mod:`sirerag.report.render` escapes what it writes as HTML and
embeds the rest as JSON). Entries refer to each other by position in the pool,
which keeps the embedded JSON small for pools of tens of thousands of entries.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

from sirerag.pool.loaded import LoadedIndex
from sirerag.core.types import Node

logger = logging.getLogger(__name__)

KIND_CODES = {"leaf": 0, "summary": 1, "aggregate": 2, "proposition": 3}
TREE_CODES = {"similarity": 0, "relatedness": 1}


@dataclass
class ReportData:
    """Entries, documents and propositions of an index, cross-referenced by position.

    Attributes:
        entries: the pool entries in pool order.
        children: per entry, positions of its children (ids not in the pool are dropped).
        doc_index: document id -> position in ``docs``.
        docs: ``(id, title)`` per document, in corpus order.
        props: ``(text, doc position, leaf position or -1)`` of the propositions aggregates refer to.
        prop_index: proposition id -> position in ``props``.
        roots: per tree name, positions of the entries no other entry of that tree has as a child,
            highest level first.
        graph: the entity graph as lists (see :mod:`sirerag.report.graphdata`), or None.
    """

    entries: Sequence[Node]
    children: list[list[int]]
    doc_index: dict[str, int]
    docs: list[tuple[str, str]]
    props: list[tuple[str, int, int]] = field(default_factory=list)
    prop_index: dict[str, int] = field(default_factory=dict)
    roots: dict[str, list[int]] = field(default_factory=dict)
    graph: dict[str, Any] | None = None

    def title(self, position: int) -> str:
        """Title of the first passage of an entry ('' when it has none)."""
        passages = self.entries[position].passages
        if not passages or passages[0] not in self.doc_index:
            return ""
        return self.docs[self.doc_index[passages[0]]][1]


def collect(index: LoadedIndex) -> ReportData:
    """Cross-reference the pool, the documents and the propositions of ``index``."""
    entries = index.pool.entries
    position = {e.id: i for i, e in enumerate(entries)}
    children = [[position[c] for c in e.children if c in position] for e in entries]
    documents = index.documents()
    docs = [(d.id, d.title) for d in documents]
    doc_index = {d.id: i for i, d in enumerate(documents)}
    data = ReportData(entries=entries, children=children, doc_index=doc_index, docs=docs)
    wanted = {pid for e in entries if e.kind == "aggregate" for pid in e.propositions}
    if wanted:
        for prop in index.propositions():
            if prop.id in wanted:
                data.prop_index[prop.id] = len(data.props)
                data.props.append((prop.text, doc_index.get(prop.doc_id, -1), position.get(prop.chunk_id, -1)))
    for tree in ("similarity", "relatedness"):
        members = [i for i, e in enumerate(entries) if e.tree == tree]
        if not members:
            continue
        has_parent = {c for i in members for c in children[i] if entries[c].tree == tree}
        roots = [i for i in members if i not in has_parent]
        data.roots[tree] = sorted(roots, key=lambda i: (-entries[i].level, i))
    logger.info("report: %d entries, %d documents, %d aggregate propositions, roots %s", len(entries), len(docs),
                len(data.props), {t: len(r) for t, r in data.roots.items()})
    return data


#: the text field of an aggregate whose text is its propositions' texts joined by spaces (the usual
#: case, see :mod:`sirerag.trees.aggregates`): the page rebuilds it instead of storing it twice
JOINED = 0


def entries_json(data: ReportData) -> list[list[Any]]:  # Any: JSON values of mixed types
    """One compact row per entry: ``[kind, tree, level, text, children, passages, entity, propositions]``
    (kind and tree as codes, passages as document positions, propositions as positions in ``props``,
    an aggregate's text as :data:`JOINED` when it is its propositions joined; empty fields after the
    text dropped from the end)."""
    rows: list[list[Any]] = []
    for e, kids in zip(data.entries, data.children):
        passages = [data.doc_index[p] for p in e.passages if p in data.doc_index]
        props = [data.prop_index[p] for p in e.propositions if p in data.prop_index]
        text: str | int = e.text
        if props and len(props) == len(e.propositions) and e.text == " ".join(data.props[p][0] for p in props):
            text = JOINED
        row = [KIND_CODES[e.kind], TREE_CODES[e.tree], e.level, text, kids, passages, e.entity, props]
        while len(row) > 4 and not row[-1]:
            row.pop()
        rows.append(row)
    return rows
