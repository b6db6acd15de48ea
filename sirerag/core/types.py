"""Typed records passed between stages.

Every record is a frozen dataclass whose ``id`` is a content hash, so that
rebuilding from the same input gives the same ids and only what is missing is
recomputed. Records serialise to plain JSON dicts with :meth:`to_dict` and back
with ``from_dict``; nothing here is pickled.
"""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator, Literal, Mapping, Sequence, get_args

import numpy as np

_WS = re.compile(r"\s+")

Kind = Literal["leaf", "summary", "aggregate", "proposition"]
Tree = Literal["similarity", "relatedness"]
#: the values of :data:`Kind` and :data:`Tree`, for checks at run time (one source for both)
KINDS: tuple[str, ...] = get_args(Kind)
TREES: tuple[str, ...] = get_args(Tree)


#: Abbreviations that may start or end a name (titles, name and company suffixes); written
#: with a final period they neither end a sentence nor lose the period in an entity.
NAME_ABBREVIATIONS: tuple[str, ...] = (
    "Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Jr", "Sr", "Mt", "Ft", "Gen", "Col", "Lt", "Sgt", "Capt", "Cmdr",
    "Gov", "Sen", "Rep", "Rev", "Hon", "Fr", "Inc", "Ltd", "Co", "Corp", "Bros", "No", "Ave", "Dept", "Univ",
)
#: Every abbreviation (lower case, without the final period) after which a period does not end
#: a sentence: the name abbreviations and common others. The one list for chunking and extraction.
ABBREVIATIONS: frozenset[str] = frozenset(a.lower() for a in NAME_ABBREVIATIONS) | frozenset(
    "vs etc e.g i.e vol pp fig jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.d b.c approx ca".split())


def collapse_ws(text: str) -> str:
    """Collapse runs of white space to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def content_id(prefix: str, *parts: str, length: int = 16) -> str:
    """``prefix + sha1("\\n".join(parts))[:length]``: a stable id derived from content."""
    digest = hashlib.sha1("\n".join(parts).encode("utf-8")).hexdigest()
    return prefix + digest[:length]


def document_id(title: str, text: str) -> str:
    """The id scheme of ``shared/bench`` corpora: ``"p" + sha1(title + "\\n" + text)[:16]``
    after white space is collapsed in both."""
    return content_id("p", collapse_ws(title), collapse_ws(text))


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    names = _field_names(cls)
    if not names.issuperset(data):
        unknown = set(data) - names
        raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}; allowed: {sorted(names)}")
    kwargs = dict(data)
    for key, value in data.items():
        if isinstance(value, list):
            kwargs[key] = tuple(value)
    return cls(**kwargs)


class _Record:
    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)  # type: ignore[call-overload]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):  # noqa: ANN206
        return _from_dict(cls, data)


@dataclass(frozen=True)
class Document(_Record):
    """One input document (a benchmark passage, a file, a JSON row, a section of a Markdown file).

    ``section``: the heading path of a Markdown section (``"Install > Linux"``), empty otherwise.
    ``source``: for a document read from a folder corpus, the file it came from as ``FOLDER/RELATIVE/PATH``
    (``FOLDER`` the folder's own name), so ``add --sync`` knows which documents a folder gave; empty for
    documents from a ``.jsonl``/``.json`` file or from Python. Both are left out of :meth:`to_dict` when
    empty, so other corpora's records do not change.
    """

    id: str
    text: str
    title: str = ""
    section: str = ""
    source: str = ""

    @property
    def heading(self) -> str:
        """Title and heading path: ``"docs/a.md > Install > Linux"`` (the title alone without a section)."""
        return " > ".join(part for part in (self.title, self.section) if part)

    @property
    def content(self) -> str:
        """Title (and heading path) and text as one string, the heading on its own first line when present."""
        heading = self.heading
        return f"{heading}\n{self.text}" if heading else self.text

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "text": self.text, "title": self.title}
        return {**out, **{key: value for key, value in (("section", self.section), ("source", self.source)) if value}}


@dataclass(frozen=True)
class Chunk(_Record):
    """A piece of one document; ``index`` is its position in the document."""

    id: str
    doc_id: str
    index: int
    text: str
    n_tokens: int

    @staticmethod
    def make_id(doc_id: str, index: int, text: str) -> str:
        return content_id("c", doc_id, str(index), text)


@dataclass(frozen=True)
class Proposition(_Record):
    """An atomic fact extracted from a chunk, with its (normalised) entities."""

    id: str
    text: str
    entities: tuple[str, ...]
    chunk_id: str
    doc_id: str
    index: int  # order of the proposition within its chunk

    @staticmethod
    def make_id(chunk_id: str, index: int, text: str) -> str:
        return content_id("f", chunk_id, str(index), text)


@dataclass(frozen=True)
class Node(_Record):
    """A node of a tree, and an entry of the retrieval pool.

    Attributes:
        id: content hash.
        text: what a retriever indexes and a reader reads.
        kind: ``leaf`` (a chunk), ``summary``, ``aggregate`` (propositions sharing an
            entity) or ``proposition`` (only in ablations that put them in the pool).
        tree: ``similarity`` or ``relatedness``.
        level: 0 for leaves and aggregates, 1.. for summaries above them.
        children: ids of the nodes one level down (empty at level 0).
        passages: ids of the source documents under this node, in corpus order.
        entity: for aggregates, the normalised entity shared by its propositions.
        propositions: for aggregates, the proposition ids concatenated, in order.
    """

    id: str
    text: str
    kind: Kind
    tree: Tree
    level: int
    children: tuple[str, ...] = ()
    passages: tuple[str, ...] = ()
    entity: str | None = None
    propositions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Node.kind must be one of {KINDS}, got {self.kind!r}")
        if self.tree not in TREES:
            raise ValueError(f"Node.tree must be one of {TREES}, got {self.tree!r}")

    @staticmethod
    def make_id(kind: str, tree: str, level: int, text: str, children: Sequence[str] = ()) -> str:
        return content_id(kind[0], tree, str(level), text, ",".join(children))


@dataclass(frozen=True, eq=False)
class Pool:
    """The flattened retrieval pool: every node of every tree, with one embedding row each.

    ``embeddings[i]`` belongs to ``entries[i]``; rows are L2-normalised float32. ``entries`` is a tuple, or for
    a pool read from an index a sequence that parses an entry when first used
    (:class:`~sirerag.pool.entries.LazyEntries`); such a sequence gives the entries' ``ids`` and ``kinds``
    (and the passages of its leaves, ``leaf_passages()``) without parsing them, and so do :attr:`ids`,
    :attr:`kinds` and :meth:`leaves_of`.
    """

    entries: Sequence[Node]
    embeddings: np.ndarray
    _positions: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.embeddings.ndim != 2 or self.embeddings.shape[0] != len(self.entries):
            raise ValueError(
                f"Pool.embeddings must have shape (n_entries={len(self.entries)}, dim), "
                f"got {self.embeddings.shape}"
            )
        self._positions.update(zip(self.ids, range(len(self.entries))))
        if len(self._positions) != len(self.entries):
            raise ValueError("Pool.entries contain duplicate ids")

    def __len__(self) -> int:
        return len(self.entries)

    @functools.cached_property
    def ids(self) -> Sequence[str]:
        """The entries' ids, in pool order."""
        ids = getattr(self.entries, "ids", None)
        return ids if ids is not None else [e.id for e in self.entries]

    @functools.cached_property
    def kinds(self) -> Sequence[str]:
        """The entries' kinds, in pool order."""
        kinds = getattr(self.entries, "kinds", None)
        return kinds if kinds is not None else [e.kind for e in self.entries]

    def position(self, entry_id: str) -> int:
        """Row of ``entry_id`` in ``entries`` and ``embeddings``."""
        return self._positions[entry_id]

    def get(self, entry_id: str) -> Node:
        return self.entries[self._positions[entry_id]]

    def leaves_of(self, passage: str) -> tuple[Node, ...]:
        """The leaf entries of ``passage`` (the chunks of that document), in pool order."""
        return tuple(self.entries[row] for row in self._leaves.get(passage, ()))

    def scan(self) -> Iterator[Node]:
        """Every entry once, in pool order; a pool read lazily parses each and does not keep it (for a stage
        that reads every entry once: the build's BM25, counts and graph aids)."""
        stream = getattr(self.entries, "stream", None)
        return stream() if stream is not None else iter(self.entries)

    def leaf_passages(self) -> dict[int, tuple[str, ...]]:
        """The passages of every leaf entry, by row (a pool read lazily scans them without parsing entries)."""
        read = getattr(self.entries, "leaf_passages", None)
        return read() if read is not None else {i: e.passages for i, e in enumerate(self.entries) if e.kind == "leaf"}

    @functools.cached_property
    def _leaves(self) -> dict[str, tuple[int, ...]]:
        passages = self.leaf_passages()
        by: dict[str, list[int]] = {}
        for row in sorted(passages):
            for p in passages[row]:
                by.setdefault(p, []).append(row)
        return {p: tuple(rows) for p, rows in by.items()}

    def counts(self) -> dict[str, int]:
        """Entries per ``"<tree>/<kind>/level<level>"``, sorted by key (the manifest's and
        ``sirerag stats``' ``by_tree_kind_level``)."""
        by: dict[str, int] = {}
        for e in self.scan():
            key = f"{e.tree}/{e.kind}/level{e.level}"
            by[key] = by.get(key, 0) + 1
        return dict(sorted(by.items()))
