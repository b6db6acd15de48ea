"""The manifest's ``config`` (the build's settings), ``counts`` (what each stage of the build or the last update
counted) and ``history`` (one record per ``sirerag add``/``remove``), typed: each record reads its JSON object once (``from_dict``, a bad
field is one :class:`~sirerag.core.errors.IndexFormatError` naming it) and writes back the object it was read
from, with its typed fields over it (``to_dict``: the fields this version does not type are kept, in order)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping

from sirerag.core.io.manifest.records import as_object, bad_field, take

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def written(record: DataclassInstance) -> dict[str, Any]:
    """The JSON object of a record that keeps what it was read from in ``raw``: ``raw`` (its keys in their
    order), with the typed fields that are set over it (records nested in them written the same way)."""
    out = dict(getattr(record, "raw"))
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name != "raw" and value is not None:
            out[f.name] = value.to_dict() if hasattr(value, "to_dict") else value
    return out


@dataclass(frozen=True)
class ConfigRecord:
    """``config``: the build's settings as it wrote them (:meth:`sirerag.core.config.BuildConfig.to_dict`):
    ``trees``, ``seed`` and each section's recorded fields (``sections``: name -> fields);
    :meth:`~sirerag.core.io.manifest.Manifest.build_config` parses them into a ``BuildConfig``."""

    trees: tuple[str, ...] | None = None
    seed: int | None = None
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: object, where: str = "config") -> "ConfigRecord":
        data = as_object(data, where)
        trees = take(data, "trees", "list", where)
        if trees is not None and not all(isinstance(t, str) for t in trees):
            raise bad_field(f"{where}.trees", "a list of tree names", trees)
        sections = {name: value for name in data if name not in ("trees", "seed")
                    and (value := take(data, name, "dict", where)) is not None}
        return cls(trees=tuple(trees) if trees is not None else None, seed=take(data, "seed", "int", where),
                   sections=sections, raw=data)

    def recorded(self, section: str, name: str) -> bool:
        """Whether the build recorded the setting ``section.name`` (a build before the setting existed did not)."""
        return name in (self.sections.get(section) or {})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)


@dataclass(frozen=True)
class TreeCounts:
    """``counts.similarity_tree`` or ``counts.relatedness_tree``: the tree's ``nodes`` and why it stopped
    (``stop_reason``); for the relatedness tree its ``variant`` and the ``aggregation_rule`` its aggregates
    followed (``raw``: the whole object, its levels, times and clustering counts included)."""

    nodes: int | None = None
    stop_reason: str | None = None
    variant: str | None = None
    aggregation_rule: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: object, where: str) -> "TreeCounts":
        data = as_object(data, where)
        return cls(nodes=take(data, "nodes", "int", where), stop_reason=take(data, "stop_reason", "str", where),
                   variant=take(data, "variant", "str", where),
                   aggregation_rule=take(data, "aggregation_rule", "str", where), raw=data)

    def to_dict(self) -> dict[str, Any]:
        return written(self)


@dataclass(frozen=True)
class PoolCounts:
    """``counts.pool``: the pool's ``entries`` and their count by ``tree/kind/levelN``."""

    entries: int | None = None
    by_tree_kind_level: Mapping[str, int] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: object, where: str = "counts.pool") -> "PoolCounts":
        data = as_object(data, where)
        by_level = take(data, "by_tree_kind_level", "dict", where)
        if by_level is not None and not all(isinstance(n, int) for n in by_level.values()):
            raise bad_field(f"{where}.by_tree_kind_level", "an object of integers", by_level)
        return cls(entries=take(data, "entries", "int", where), by_tree_kind_level=by_level, raw=data)

    def to_dict(self) -> dict[str, Any]:
        return written(self)


@dataclass(frozen=True)
class Counts:
    """``counts``: ``documents`` and ``chunks`` of the corpus, the ``pool``, and each tree's counts
    (``raw``: the whole object, the extraction's counts included)."""

    documents: int | None = None
    chunks: int | None = None
    pool: PoolCounts | None = None
    similarity_tree: TreeCounts | None = None
    relatedness_tree: TreeCounts | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: object, where: str = "counts") -> "Counts":
        data = as_object(data, where)
        pool = take(data, "pool", "dict", where)
        trees = {name: TreeCounts.from_dict(data[name], f"{where}.{name}") if data.get(name) is not None else None
                 for name in ("similarity_tree", "relatedness_tree")}
        return cls(documents=take(data, "documents", "int", where), chunks=take(data, "chunks", "int", where),
                   pool=PoolCounts.from_dict(pool, f"{where}.pool") if pool is not None else None, **trees, raw=data)

    def to_dict(self) -> dict[str, Any]:
        return written(self)


@dataclass(frozen=True)
class HistoryEntry:
    """One ``history`` record: the ``command`` (``add``, ``remove``), when it ran (``time``), the documents
    and leaves it changed, the summaries it wrote and kept stale, and its ``refresh_threshold``."""

    command: str | None = None
    time: str | None = None
    documents_added: int | None = None
    documents_updated: int | None = None
    documents_removed: int | None = None
    documents_skipped: int | None = None
    leaves_added: int | None = None
    leaves_removed: int | None = None
    summaries_written: int | None = None
    summaries_stale: int | None = None
    chunks_extracted: int | None = None
    refresh_threshold: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, data: object, where: str = "history") -> "HistoryEntry":
        data = as_object(data, where)
        ints = {f.name: take(data, f.name, "int", where) for f in fields(cls)
                if f.name not in ("command", "time", "refresh_threshold", "raw")}
        return cls(command=take(data, "command", "str", where), time=take(data, "time", "str", where),
                   refresh_threshold=take(data, "refresh_threshold", "number", where), raw=data, **ints)

    def to_dict(self) -> dict[str, Any]:
        return written(self)
