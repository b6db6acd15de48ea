"""``graph/graph.json``, the entity graph's own record, typed: its ``format``, the ``embedder`` of its entity
vectors, the ``settings`` it was built with, its ``stats`` and the ``query_aids`` stored beside it
(:mod:`sirerag.graph.query_aids`). Read once by :func:`sirerag.graph.store.load_graph`; a bad field is one
:class:`~sirerag.core.errors.IndexFormatError` naming the file and the field."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sirerag.core.errors import IndexFormatError
from sirerag.core.io.manifest.records import as_object, take

#: the layout of ``graph/`` this version reads and writes
GRAPH_FORMAT = 1
#: how each graph setting is checked (:func:`~sirerag.core.io.manifest.records.take`)
_SETTING_KINDS = {"title_weight": "number", "embed_facts": "bool", "synonym_threshold": "number",
                  "synonym_max_neighbors": "int", "damping": "number", "tol": "number", "max_iter": "int"}
_RECORD = "graph.json"


@dataclass(frozen=True)
class GraphBuildSettings:
    """``settings``: the :class:`~sirerag.core.config.GraphConfig` values the graph was built with (a graph
    written before a setting existed lacks it: None)."""

    title_weight: float | None = None
    embed_facts: bool | None = None
    synonym_threshold: float | None = None
    synonym_max_neighbors: int | None = None
    damping: float | None = None
    tol: float | None = None
    max_iter: int | None = None

    @classmethod
    def from_dict(cls, data: object) -> "GraphBuildSettings":
        data = as_object(data, "settings", _RECORD)
        return cls(**{name: take(data, name, kind, "settings", record=_RECORD)
                      for name, kind in _SETTING_KINDS.items()})

    def recorded(self) -> dict[str, Any]:
        """The settings the graph recorded, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class GraphMeta:
    """``graph.json``. ``stats``: the graph's counts (as :attr:`EntityGraph.stats`); ``query_aids``: aid name
    -> its record (paths and what it was made from); ``name_embedder``: the spec of the embedder of the entity
    names when it is not the index embedder (``graph.name_vectors``: MiniLM's int8 export or the static
    embedder); ``extra``: the fields this version does not know."""

    format: int
    embedder: str | None = None
    settings: GraphBuildSettings = field(default_factory=GraphBuildSettings)
    stats: dict[str, Any] = field(default_factory=dict)
    query_aids: dict[str, dict[str, Any]] = field(default_factory=dict)
    name_embedder: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, source: str | Path) -> "GraphMeta":
        """Read ``graph.json``'s object (``source``: its path, for messages).

        Raises:
            IndexFormatError: another graph format (rebuild), or a field of the wrong type.
        """
        try:
            data = as_object(data, "graph", _RECORD)
            version = data.get("format")
            if version != GRAPH_FORMAT:
                raise IndexFormatError(f"graph format {version!r} is not supported (this version reads format "
                                       f"{GRAPH_FORMAT}); rebuild the index")
            settings, aids = (take(data, key, "dict", "", record=_RECORD) for key in ("settings", "query_aids"))
            for name, record in (aids or {}).items():
                as_object(record, f"query_aids.{name}", _RECORD)
            return cls(format=version, embedder=take(data, "embedder", "str", "", record=_RECORD),
                       settings=GraphBuildSettings.from_dict(settings or {}),
                       stats=take(data, "stats", "dict", "", record=_RECORD) or {}, query_aids=dict(aids or {}),
                       name_embedder=take(data, "name_embedder", "str", "", record=_RECORD),
                       extra={k: v for k, v in data.items() if k not in {f.name for f in fields(cls)}})
        except IndexFormatError as exc:
            raise IndexFormatError(f"{source}: {exc}") from None


