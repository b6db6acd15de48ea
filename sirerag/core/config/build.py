"""The whole build configuration: sections together, TOML loading and overrides."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, TypeVar

from sirerag.core.config.sections import (
    SECTIONS,
    TREE_CHOICES,
    ChunkingConfig,
    ClusteringConfig,
    CorpusConfig,
    DenseConfig,
    EmbedderConfig,
    EngineConfig,
    ExtractionConfig,
    GraphConfig,
    LLMConfig,
    RelatednessConfig,
    TreeConfig,
)
from sirerag.core.config.typecheck import SEED_LIMIT, check_types
from sirerag.core.errors import ConfigError, check

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Section = TypeVar("_Section", bound="DataclassInstance")

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class BuildConfig:
    """Everything ``sirerag build`` needs; ``seed`` threads into UMAP and the mixtures."""

    trees: tuple[str, ...] = ("similarity", "relatedness")
    seed: int = 224
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    clustering: ClusteringConfig = field(default_factory=ClusteringConfig)
    tree: TreeConfig = field(default_factory=TreeConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    relatedness: RelatednessConfig = field(default_factory=RelatednessConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    dense: DenseConfig = field(default_factory=DenseConfig)

    def validate(self) -> "BuildConfig":
        """Check the type of every field, then every range; returns the settings to build with (``self``,
        or a copy with ``extraction.extractor = "auto"`` resolved: ``llm`` when an LLM is configured, as the
        README promises for ``--llm``, else ``offline``), so calls can be chained."""
        check_types(self)
        check(all(t in TREE_CHOICES for t in self.trees) and len(set(self.trees)) == len(self.trees), "trees",
              self.trees, f"a tuple of distinct values from {TREE_CHOICES} (empty for leaves only)")
        check(0 <= self.seed < SEED_LIMIT, "seed", self.seed, "an integer from 0 to 2**32 - 1")
        for name in SECTIONS:
            getattr(self, name).validate()
        if self.extraction.extractor != "auto":
            return self
        extractor = "llm" if (self.extraction.llm or self.llm.spec) else "offline"
        return replace(self, extraction=replace(self.extraction, extractor=extractor))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"trees": list(self.trees), "seed": self.seed}
        for name in SECTIONS:
            section = getattr(self, name)
            out[name] = {f.name: getattr(section, f.name) for f in fields(section)}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "config") -> "BuildConfig":
        """Build from a nested mapping (a parsed TOML file); unknown keys are errors."""
        allowed = {"trees", "seed", *SECTIONS}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        kwargs: dict[str, Any] = {}
        if "trees" in data:
            trees = data["trees"]
            kwargs["trees"] = tuple(trees) if isinstance(trees, (list, tuple)) else trees
        if "seed" in data:
            kwargs["seed"] = data["seed"]
        for name, section_cls in SECTIONS.items():
            if name in data:
                kwargs[name] = section_from_mapping(section_cls, data[name], f"{source}: [{name}]")
        config = cls(**kwargs)
        check_types(config, f"{source}: ")
        return config

    def with_overrides(self, **sections: Mapping[str, Any]) -> "BuildConfig":
        """Return a copy with fields of named sections replaced (``trees``/``seed`` as plain values)."""
        changes: dict[str, Any] = {}
        for name, values in sections.items():
            if name in ("trees", "seed"):
                changes[name] = values
            elif name in SECTIONS:
                current = getattr(self, name)
                section_from_mapping(type(current), values, f"[{name}]")  # rejects unknown fields
                changes[name] = replace(current, **dict(values))
            else:
                raise ConfigError(f"unknown config section {name!r}; allowed: {sorted(SECTIONS)}")
        return replace(self, **changes)


def section_from_mapping(section_cls: type[_Section], values: object, where: str, *,
                         lists_as_tuples: bool = False) -> _Section:
    """Build a config section from a TOML table; unknown settings and values of the wrong type
    are errors naming ``where`` (ranges are checked by the section's ``validate``)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where} must be a table of settings, got {values!r}")
    names = {f.name for f in fields(section_cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {unknown}; allowed: {sorted(names)}")
    if lists_as_tuples:
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    section = section_cls(**dict(values))
    check_types(section, f"{where} ")
    return section


def load_config(path: str | Path) -> BuildConfig:
    """Read a TOML build configuration; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return BuildConfig.from_dict(data, source=str(path))
