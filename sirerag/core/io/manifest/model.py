"""The :class:`Manifest` of an index: its header, sections and file records, typed."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sirerag import __version__
from sirerag.core.config import BuildConfig
from sirerag.core.errors import IndexFormatError
from sirerag.core.io.checksums import MANIFEST
from sirerag.core.io.manifest.sections import ConfigRecord, Counts, HistoryEntry
from sirerag.core.io.manifest.records import (
    FORMAT_MARKER, FORMAT_VERSION, HEADER, Component, Corpus, Drift, EmbedderRecord, FileRecord, Resources, bad_field,
    is_int, as_object, take)

#: The sections of a manifest after its header, in the order a build and then an update write them.
SECTIONS = ("config", "corpus", "components", "embedder", "summarizer", "llm", "extractor", "counts", "timings",
            "resources", "history", "drift", "staleness")


@dataclass
class Manifest:
    """The manifest of an index: the header (``format``, ``format_version``, ``sirerag_version``), the
    build's settings (``config``: :meth:`sirerag.core.config.BuildConfig.to_dict`, typed by
    :meth:`build_config`), the models (``embedder``, ``summarizer``, ``llm``, ``extractor``), the
    ``components``, the stages' ``counts``, ``timings`` and ``resources`` (peak memory), the updates
    (``history``, ``drift``, ``staleness``: summary id -> member tokens changed since it was written) and the ``files``.
    ``extra`` keeps top-level fields this version does not know, as they were; ``keys`` the order of
    the fields read (so :meth:`to_dict` writes back the same keys in the same order)."""

    format_version: int = FORMAT_VERSION
    sirerag_version: str | None = __version__
    format: str | None = FORMAT_MARKER
    config: ConfigRecord = field(default_factory=ConfigRecord)
    corpus: Corpus | None = None
    components: dict[str, Component] = field(default_factory=dict)
    embedder: EmbedderRecord | None = None
    summarizer: str | None = None
    llm: str | None = None
    extractor: str | None = None
    counts: Counts = field(default_factory=Counts)
    timings: dict[str, Any] = field(default_factory=dict)
    resources: Resources | None = None
    history: list[HistoryEntry] = field(default_factory=list)
    drift: Drift | None = None
    staleness: dict[str, int] | None = None
    files: dict[str, FileRecord] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: object, *, source: str | Path = MANIFEST) -> "Manifest":
        """Read a manifest's JSON object. Raises IndexFormatError naming ``source`` and the bad field."""
        try:
            return cls._read(data)
        except IndexFormatError as exc:
            raise IndexFormatError(f"{source}: {exc}; not a readable sirerag index manifest") from None

    @classmethod
    def _read(cls, data: Any) -> "Manifest":
        data = as_object(data, "manifest")
        version = take(data, "format_version", "int", "", required=True)
        files = {rel: FileRecord.from_dict(rec, f"files.{rel}")
                 for rel, rec in (take(data, "files", "dict", "") or {}).items()}
        header = dict(format_version=version, sirerag_version=take(data, "sirerag_version", "str", ""),
                      format=take(data, "format", "str", ""), files=files, keys=tuple(data))
        if version != FORMAT_VERSION:  # another version: its header and files, the rest as it was
            return cls(**header, extra={k: v for k, v in data.items() if k not in HEADER})
        corpus, embedder, drift, resources = (take(data, key, "dict", "")
                                              for key in ("corpus", "embedder", "drift", "resources"))
        components = take(data, "components", "dict", "") or {}
        staleness = take(data, "staleness", "dict", "")
        if staleness is not None and not all(is_int(n) for n in staleness.values()):
            raise bad_field("staleness", "an object of integers", staleness)
        return cls(**header, config=ConfigRecord.from_dict(take(data, "config", "dict", "") or {}),
                   corpus=Corpus.from_dict(corpus) if corpus is not None else None,
                   components={name: Component.from_dict(c, f"components.{name}") for name, c in components.items()},
                   embedder=EmbedderRecord.from_dict(embedder) if embedder is not None else None,
                   summarizer=take(data, "summarizer", "str", ""), llm=take(data, "llm", "str", ""),
                   extractor=take(data, "extractor", "str", ""),
                   counts=Counts.from_dict(take(data, "counts", "dict", "") or {}),
                   timings=take(data, "timings", "dict", "") or {},
                   resources=Resources.from_dict(resources) if resources is not None else None,
                   history=[HistoryEntry.from_dict(h, f"history[{i}]")
                            for i, h in enumerate(take(data, "history", "list", "") or [])],
                   drift=Drift.from_dict(drift) if drift is not None else None, staleness=staleness,
                   extra={k: v for k, v in data.items() if k not in HEADER and k not in SECTIONS})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: the header, the sections read (in their order) and those set since, ``files``."""
        values = {"config": self.config.to_dict(), "corpus": self.corpus and self.corpus.to_dict(),
                  "components": {name: c.to_dict() for name, c in self.components.items()},
                  "embedder": self.embedder and self.embedder.to_dict(), "summarizer": self.summarizer,
                  "llm": self.llm, "extractor": self.extractor, "counts": self.counts.to_dict(),
                  "timings": self.timings, "resources": self.resources and self.resources.to_dict(),
                  "history": [entry.to_dict() for entry in self.history],
                  "drift": self.drift and self.drift.to_dict(), "staleness": self.staleness}
        out: dict[str, Any] = {"format": self.format} if self.format is not None else {}
        out.update(format_version=self.format_version)
        if self.sirerag_version is not None:
            out["sirerag_version"] = self.sirerag_version
        read = [k for k in self.keys if k not in HEADER]
        for key in read + [k for k in (*SECTIONS, *self.extra) if k not in read]:
            if key in self.extra:
                out[key] = self.extra[key]
            elif key in values and (key in read or values[key] not in (None, {}, [])):
                out[key] = values[key]
        if self.files or "files" in self.keys:
            out["files"] = {rel: record.to_dict() for rel, record in self.files.items()}
        return out

    def copied(self) -> "Manifest":
        """A deep copy (what an update changes and writes)."""
        return Manifest.from_dict(json.loads(json.dumps(self.to_dict())))

    @property
    def lists_files(self) -> bool:
        """Whether the manifest lists its files (format 2 on; format 1 did not)."""
        return "files" in self.keys or bool(self.files)

    @property
    def documents(self) -> int | None:
        return self.corpus.documents if self.corpus is not None else None

    @property
    def trees(self) -> tuple[str, ...]:
        """The trees the index was built with (``config.trees``; empty: leaves only)."""
        return self.config.trees or ()

    def build_config(self, *, source: str | Path = MANIFEST) -> BuildConfig:
        """The build's settings as a :class:`~sirerag.core.config.BuildConfig` (unvalidated; ConfigError
        naming ``source`` and the setting when they do not parse)."""
        return BuildConfig.from_dict(self.config.raw, source=str(source))

    def component(self, name: str) -> Component | None:
        return self.components.get(name)
