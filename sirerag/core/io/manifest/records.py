"""The parts of a manifest as records: :class:`FileRecord`, :class:`EmbedderRecord`, :class:`Component`,
:class:`Drift`, :class:`Corpus`; each reads its JSON object (``from_dict``, errors naming the field) and
writes it back (``to_dict``: the fields set, then the ones this version does not know, kept in ``extra``)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping

from sirerag.core.errors import IndexFormatError

#: Version of the index directory layout; bump on incompatible changes
#: (2: the manifest lists every file with its size and sha256).
FORMAT_VERSION = 2
#: The marker that says a manifest was written by sirerag.
FORMAT_MARKER = "sirerag-index"
#: The fields :func:`write_manifest` writes itself (format marker, versions, file records).
HEADER = ("format", "format_version", "sirerag_version", "files")


def bad_field(where: str, expected: str, value: object, record: str = "manifest") -> IndexFormatError:
    """The error of a field of ``record`` (the manifest, or another file such as ``graph.json``)."""
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return IndexFormatError(f"{record} field {where!r} must be {expected}, got {shown}")


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (is_int, "an integer"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "number": (_is_number, "a number"),
    "dict": (lambda v: isinstance(v, dict), "an object"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "ints": (lambda v: isinstance(v, list) and all(is_int(n) for n in v), "a list of integers"),
}


def as_object(data: object, where: str, record: str = "manifest") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise bad_field(where, "an object", data, record)
    return data


def take(data: Mapping[str, Any], key: str, kind: str, where: str, *, required: bool = False,
          nullable: bool = True, record: str = "manifest") -> Any:  # Any: a JSON value, of the kind checked
    """``data[key]`` checked against ``kind`` (:data:`_KINDS`); None when absent (or null and ``nullable``).
    ``record``: the file the field is in, for the message."""
    name = f"{where}.{key}" if where else key
    if key not in data:
        if required:
            raise IndexFormatError(f"{record} field {name!r} is missing")
        return None
    value = data[key]
    if value is None and nullable and not required:
        return None
    test, expected = _KINDS[kind]
    if not test(value):
        raise bad_field(name, expected, value, record)
    return value


def _plain(record: Any) -> dict[str, Any]:
    """The fields of a record dataclass that are set (not None), in field order, then its ``extra``."""
    out = {f.name: getattr(record, f.name) for f in fields(record) if f.name != "extra"
           and getattr(record, f.name) is not None}
    return {**out, **getattr(record, "extra", {})}


def _extra(data: Mapping[str, Any], cls: type) -> dict[str, Any]:
    known = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k not in known}


@dataclass
class FileRecord:
    """One index file: its size and sha256; ``rows`` of a ``.jsonl``; ``dtype``, ``shape`` and the sample
    checksum (:func:`~sirerag.core.io.checksums.sample_digest`) of a ``.npy`` (manifests before it have none)."""

    size: int
    sha256: str
    rows: int | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    sample_sha256: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "files") -> "FileRecord":
        data = as_object(data, where)
        shape = take(data, "shape", "ints", where)
        return cls(size=take(data, "size", "int", where, required=True),
                   sha256=take(data, "sha256", "str", where, required=True), rows=take(data, "rows", "int", where),
                   dtype=take(data, "dtype", "str", where), shape=tuple(shape) if shape is not None else None,
                   sample_sha256=take(data, "sample_sha256", "str", where), extra=_extra(data, cls))

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out


@dataclass
class EmbedderRecord:
    """The embedder of the pool: ``spec`` (its name in cache keys), ``load_spec`` (what loads it again, as given
    to the build), ``dim``, and ``query_export`` (the ONNX export of MiniLM queries use: backend and key)."""

    spec: str | None = None
    load_spec: str | None = None
    dim: int | None = None
    query_export: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "embedder") -> "EmbedderRecord":
        data = as_object(data, where)
        return cls(spec=take(data, "spec", "str", where), load_spec=take(data, "load_spec", "str", where),
                   dim=take(data, "dim", "int", where), query_export=take(data, "query_export", "dict", where),
                   extra=_extra(data, cls))

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @property
    def loads_as(self) -> str | None:
        """The spec that loads this embedder again (``load_spec``, else ``spec``)."""
        return self.load_spec or self.spec


@dataclass(frozen=True)
class GraphStats:
    """The entity graph's counts (``components.graph.stats``): its ``passage_nodes`` and how many of them
    have a title other passages' propositions name (``linked_titles``; graphs before the measure have none)."""

    passage_nodes: int | None = None
    linked_titles: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "components.graph.stats") -> "GraphStats":
        data = as_object(data, where)
        return cls(passage_nodes=take(data, "passage_nodes", "int", where),
                   linked_titles=take(data, "linked_titles", "int", where), extra=_extra(data, cls))


@dataclass(frozen=True)
class Component:
    """An optional part of an index (``pool``, ``bm25``, ``graph``, ``colbert``, ``proposition_vectors``): its
    ``type``, its folder or file (``path``, relative to the index) and the settings and counts its own module
    records (``info``, every field but those two, as read). Typed: the rows of ``propositions.npy``
    (``rows``), the entity graph's ``stats`` and recorded ``settings`` (name -> value) and the ColBERT
    ``indexes`` (checkpoint -> its record)."""

    type: str | None = None
    path: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    rows: int | None = None
    stats: GraphStats | None = None
    settings: dict[str, Any] | None = None
    indexes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "components") -> "Component":
        data = as_object(data, where)
        stats, indexes = take(data, "stats", "dict", where), take(data, "indexes", "dict", where) or {}
        for key, record in indexes.items():
            as_object(record, f"{where}.indexes.{key}")
        return cls(type=take(data, "type", "str", where), path=take(data, "path", "str", where),
                   info={k: v for k, v in data.items() if k not in ("type", "path")},
                   rows=take(data, "rows", "int", where),
                   stats=GraphStats.from_dict(stats, f"{where}.stats") if stats is not None else None,
                   settings=take(data, "settings", "dict", where), indexes=dict(indexes))

    def to_dict(self) -> dict[str, Any]:
        return {**({"type": self.type} if self.type is not None else {}),
                **({"path": self.path} if self.path is not None else {}), **self.info}


@dataclass
class Drift:
    """Leaves added and removed by ``sirerag add``/``remove`` since the last full build and their ``share``
    (:attr:`measured_share`); ``summaries_stale``: summaries kept although their members changed."""

    leaves_at_full_build: int
    leaves_added: int = 0
    leaves_removed: int = 0
    share: float | None = None
    summaries_stale: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "drift") -> "Drift":
        data = as_object(data, where)
        return cls(leaves_at_full_build=take(data, "leaves_at_full_build", "int", where, required=True),
                   leaves_added=take(data, "leaves_added", "int", where) or 0,
                   leaves_removed=take(data, "leaves_removed", "int", where) or 0,
                   share=take(data, "share", "number", where),
                   summaries_stale=take(data, "summaries_stale", "int", where), extra=_extra(data, cls))

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @property
    def measured_share(self) -> float:
        """The leaves added or removed since the full build over every leaf the index held since (the
        build's and those added), at most 1 (a leaf added and removed again counts twice); 4 places."""
        changed = self.leaves_added + self.leaves_removed
        return round(min(1.0, changed / max(self.leaves_at_full_build + self.leaves_added, 1)), 4)


@dataclass
class Corpus:
    """What the index was built from: ``documents`` (their count after the last build or update)."""

    documents: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "corpus") -> "Corpus":
        data = as_object(data, where)
        return cls(documents=take(data, "documents", "int", where), extra=_extra(data, cls))

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass
class Resources:
    """The memory a build (or the last update) used, in MiB: ``peak_rss_mib`` of the building process and
    ``stage_peak_rss_mib``, the largest resident size of the building process seen during each stage
    (sampled; where ``/proc`` tells it: Linux)."""

    peak_rss_mib: float | None = None
    stage_peak_rss_mib: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: object, where: str = "resources") -> "Resources":
        data = as_object(data, where)
        stages = take(data, "stage_peak_rss_mib", "dict", where)
        if stages is not None and not all(_is_number(v) for v in stages.values()):
            raise bad_field(f"{where}.stage_peak_rss_mib", "an object of numbers", stages)
        return cls(peak_rss_mib=take(data, "peak_rss_mib", "number", where), stage_peak_rss_mib=stages,
                   extra=_extra(data, cls))

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)
