"""Retrievers over a pool: dense, BM25, ColBERTv2, Personalized PageRank and their fusion.

:func:`load_retriever` builds one by name from a loaded index. ``a+b`` fuses the
rankings of several retrievers (min-max score fusion by default, or RRF). Over a pool
with summaries or aggregates, the ranking is rearranged by the pool rule of
:mod:`~sirerag.retrievers.pool_rank` so that they never push out the passages.
:func:`default_retriever` names the retriever used when none is asked for.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dataclasses import replace

from sirerag.core.config.retrieval import PPR_POOL, PoolRule
from sirerag.core.errors import ConfigError
from sirerag.retrievers.base import Hit, Retriever
from sirerag.retrievers.registry import RETRIEVERS, load_base, options_of

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex

__all__ = ["Hit", "Retriever", "RETRIEVERS", "default_retriever", "load_base", "load_retriever", "options_of"]

#: options of the pool rule (any retriever): the fields of :class:`~sirerag.core.config.retrieval.PoolRule`
POOL_OPTIONS = frozenset(PoolRule.option_names())
#: The retriever used when none is asked for, best first; one whose needs the index does not meet is
#: skipped. A retriever enters this list only once it has measured best on all three bench corpora
#: (figures in docs/experiments/2026-11-24-measurements-on-the-three-bench-corpora.md).
DEFAULTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("ppr", {}),
    ("dense", {}),
)


#: PPR leads only where the graph links passages: at least this share of the passages must have a title
#: that other passages' propositions name (the graph's ``linked_titles``). Entity-centric corpora (Wikipedia
#: paragraphs: 16-19% on the bench corpora) clear it; a folder of files titled by their paths has none, and
#: there dense retrieval finds what PPR misses (docs/experiments/2026-11-25-a-default-that-fits-the-corpus.md).
MIN_LINKED_TITLES = 0.05


def graph_links_passages(index: LoadedIndex) -> bool:
    """True when the index's graph links passages through their titles (:data:`MIN_LINKED_TITLES`), or has no
    passages at all.

    Raises:
        IndexFormatError: the graph was built by an older sirerag (no count of linked titles): rebuild the index.
    """
    from sirerag.pool.current import check_current

    check_current(index, "graph")
    graph = index.manifest.component("graph")
    stats = graph.stats if graph is not None else None
    if stats is None or stats.linked_titles is None or not stats.passage_nodes:  # (check_current: not None)
        return True
    return stats.linked_titles / stats.passage_nodes >= MIN_LINKED_TITLES


def default_retriever(index: LoadedIndex) -> tuple[str, dict[str, Any]]:
    """``(name, options)`` of the retriever used when none is asked for: the first of :data:`DEFAULTS` the
    index can serve (a PPR retriever needs a graph that links passages, :func:`graph_links_passages`)."""
    has_graph = index.component("graph") is not None
    for name, options in DEFAULTS:
        if "ppr" in name.split("+"):
            if not has_graph or not graph_links_passages(index):
                continue
        return name, dict(options)
    return DEFAULTS[-1][0], dict(DEFAULTS[-1][1])


def _check_options(name: str, options: dict[str, Any]) -> None:
    """ConfigError naming the retriever, the options it does not take and the valid ones: the options of
    each part's ``load`` (:func:`~sirerag.retrievers.registry.options_of`), of the fusion (the keywords of
    :func:`sirerag.retrievers.hybrid.load`) and of the pool rule."""
    from sirerag.retrievers.hybrid import FUSION_OPTIONS

    parts = name.split("+")
    allowed = set(POOL_OPTIONS)
    for part in parts:
        allowed |= options_of(part) if part in RETRIEVERS else frozenset()
    if len(parts) > 1:
        allowed |= FUSION_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"retriever {name!r} does not take option(s) {unknown}; valid: {sorted(allowed)}")


def load_retriever(name: str | None, index: LoadedIndex,
                   **options: Any) -> Retriever:  # Any: each retriever's own options, checked here
    """Build the retriever ``name`` (or a fusion ``a+b``; None: :func:`default_retriever`)
    over a loaded index.

    Options are passed to the retriever (e.g. ``embedder=`` for dense, ``checkpoint=``
    for colbert, ``linking=`` for ppr; a fusion passes each part the options it takes).
    Pool options (any retriever): the fields of :class:`~sirerag.core.config.retrieval.PoolRule` (``pool_rule``:
    ``passages`` = the rule of :mod:`~sirerag.retrievers.pool_rank`, the default for every retriever and fusion;
    ``native`` = the retriever's own ranking; ``leaf_share``, ``lift_ratio``, ``anchor``, ``drop_covered``,
    ``pool_depth``), whose defaults for ``ppr`` are :attr:`PPRSettings.pool
    <sirerag.core.config.retrieval.PPRSettings.pool>`.

    Raises:
        ConfigError: unknown retriever or option.
    """
    if name is None:
        name, defaults = default_retriever(index)
        options = {**defaults, **options}
    if not isinstance(name, str) or not name or any(part not in RETRIEVERS for part in name.split("+")) \
            and "+" not in name:
        raise ConfigError(f"retriever must be one of {sorted(RETRIEVERS)} or a fusion like 'dense+bm25', got {name!r}")
    _check_options(name, options)
    pool_options = {k: options.pop(k) for k in list(options) if k in POOL_OPTIONS}
    from sirerag.retrievers.pool_rank import PoolRanker, has_non_leaves

    # the pool options' types and ranges, before the retriever loads
    rule = replace(PPR_POOL if name == "ppr" else PoolRule(), **pool_options).validate()
    retriever: Retriever
    if "+" in name:
        from sirerag.retrievers.hybrid import load as load_hybrid

        retriever = load_hybrid(name, index, **options)
    else:
        retriever = load_base(name, index, **options)
    if rule.pool_rule == "native" or not has_non_leaves(index.pool):
        return retriever
    return PoolRanker(retriever, index.pool, rule)
