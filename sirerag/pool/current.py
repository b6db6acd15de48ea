"""Is an index of the current format? One check, in place of fallbacks for indexes built by older versions.

``manifest.json``'s ``format_version`` says how the index is laid out (``read_manifest`` refuses another). Within
format 2 the builds added parts a search or an update relies on; an index without one of them was built by an
older sirerag, and :func:`check_current` refuses it with one line that says to rebuild, instead of a search
computing, embedding or skipping the missing part (and ranking differently from a fresh build).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from sirerag.core.config.sections import uses_rule_tagger

from sirerag.core.errors import IndexFormatError

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex

#: the graph settings a build records with the graph (``components.graph.settings``), which a search reads
GRAPH_SETTINGS = ("title_weight", "synonym_threshold", "damping", "tol", "max_iter")
#: the parts a caller may rely on (see :func:`missing_parts`)
PARTS = ("bm25", "graph", "update")
#: the query aids every build stores with the graph (``graph.json``'s ``query_aids``; the rule tagger's counts too
#: when the build tagged entities with the rules, :mod:`sirerag.graph.query_aids`)
QUERY_AIDS = ("seeds_bm25", "pool_nodes", "surface")


def missing_parts(index: LoadedIndex, *parts: str, query_aids: Mapping[str, Any] | None = None) -> list[str]:
    """What the index lacks of ``parts`` (``bm25``: its stored BM25 index; ``graph``: the graph's recorded
    settings and linked-title count and the stored proposition vectors, and with ``query_aids`` (``graph.json``'s
    record) the stored query aids; ``update``: the build settings an update repeats), as short descriptions;
    empty for an index of the current format."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"unknown index parts {unknown}; known: {list(PARTS)}")
    manifest = index.manifest
    out: list[str] = []
    if "bm25" in parts and manifest.component("bm25") is None:
        out.append("no stored BM25 index")
    graph = manifest.component("graph")
    if "graph" in parts and graph is not None:
        recorded = graph.settings or {}
        out += [f"no graph setting {name}" for name in GRAPH_SETTINGS if name not in recorded]
        if graph.stats is None or graph.stats.linked_titles is None:
            out.append("no count of linked titles")
        if manifest.component("proposition_vectors") is None:
            out.append("no stored proposition vectors")
        if query_aids is not None:
            rules = uses_rule_tagger(index.manifest.build_config(source=index.path / "manifest.json").extraction.ner)
            out += [f"no stored query aid {name}" for name in QUERY_AIDS + (("tagger",) if rules else ())
                    if name not in query_aids]
    if "update" in parts and not manifest.config.recorded("relatedness", "aggregate_vectors"):
        out.append("no relatedness.aggregate_vectors setting")
    return out


def check_current(index: LoadedIndex, *parts: str, query_aids: Mapping[str, Any] | None = None) -> None:
    """Raise unless the index holds ``parts`` as this version builds them (:func:`missing_parts`).

    Raises:
        IndexFormatError: one line naming the index and what it lacks, and saying to rebuild it with this version.
    """
    missing = missing_parts(index, *parts, query_aids=query_aids)
    if missing:
        from sirerag import __version__

        raise IndexFormatError(f"{index.path} was built by an older sirerag ({'; '.join(missing)}): rebuild it with "
                               f"sirerag {__version__} (sirerag build CORPUS --out {index.path})")


__all__ = ["GRAPH_SETTINGS", "QUERY_AIDS", "check_current", "missing_parts"]
