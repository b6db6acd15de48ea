"""Build configuration: explicit keyword dataclasses, one per stage.

Constructors do no work; :meth:`BuildConfig.validate` runs when a build starts
and raises :class:`~sirerag.core.errors.ConfigError` naming the parameter, the value
received and what is allowed. A TOML file maps onto the same sections::

    trees = ["similarity", "relatedness"]
    seed = 224
    [chunking]
    mode = "passage"
    [clustering]
    threshold = 0.1
"""
from sirerag.core.config.build import BuildConfig, load_config
from sirerag.core.config.keyword_graph import KeywordGraphConfig
from sirerag.core.config.query import QueryConfig
from sirerag.core.config.sections import (
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

__all__ = [
    "TREE_CHOICES",
    "BuildConfig",
    "CorpusConfig",
    "ChunkingConfig",
    "ClusteringConfig",
    "DenseConfig",
    "EmbedderConfig",
    "EngineConfig",
    "ExtractionConfig",
    "GraphConfig",
    "KeywordGraphConfig",
    "LLMConfig",
    "QueryConfig",
    "RelatednessConfig",
    "TreeConfig",
    "load_config",
]
