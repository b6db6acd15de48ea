"""What a PPR search reads besides the graph: the query aids stored with it (:mod:`sirerag.graph.query_aids`),
each used only for the pool and files it was made for; for another pool (one restricted to some trees), None
(the retriever computes it, and :func:`sirerag.retrievers.ppr.load` says so). An index built before the aids is
refused (:func:`sirerag.pool.current.check_current`)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from sirerag.graph.build import EntityGraph
from sirerag.graph.query_aids import load_pool_nodes, load_seeds_bm25, load_surface_forms, load_tagger_counts, seed_rows
from sirerag.graph.surface import MIN_FORM_CHARS
from sirerag.pool.store import ENTRIES

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex


def build_tagger(index: LoadedIndex, counts: dict[str, dict[str, int]] | None = None) -> Callable[[str], Sequence[str]]:
    """The offline entity tagger of the index's build, for query NER: ``extraction.ner`` of
    the manifest's config; the rule tagger is read from ``counts`` (its fitted state, stored with the graph), or
    fitted on the index's chunks as at build time when none are given."""
    from sirerag.extraction.offline import offline_extractor

    ner = index.manifest.build_config(source=index.path / "manifest.json").extraction.ner
    return offline_extractor(ner, lambda: (c.text for c in index.chunks()), counts=counts).tag


def load_aids(index: LoadedIndex, folder: Path, aids: dict[str, Any], graph: EntityGraph, *, linking: str,
              tagger: Callable[[str], Sequence[str]] | None, surface: bool, passage_seeds: str) -> dict[str, Any]:
    """The retriever's keyword arguments from the stored aids (call within ``index.reading()``): ``tagger``,
    ``surface_forms`` (``ner`` linking), ``seeds_lexical`` (``dense+bm25`` passage seeds) and ``pool_nodes``."""
    record = index.manifest.files.get(ENTRIES)
    entries_sha256 = record.sha256 if record is not None else None
    pool_nodes = load_pool_nodes(folder, aids, entries=len(index.pool), nodes=graph.n_nodes,
                                 entries_sha256=entries_sha256)
    out: dict[str, Any] = {"pool_nodes": pool_nodes}
    if linking == "ner":
        out["tagger"] = tagger if tagger is not None else build_tagger(index, load_tagger_counts(folder, aids))
        if surface:
            out["surface_forms"] = load_surface_forms(folder, aids, MIN_FORM_CHARS, graph.n_entities)
    if passage_seeds == "dense+bm25":
        rows = pool_nodes[1][0] if pool_nodes is not None else seed_rows(index.pool, graph.passage_index)[0]
        out["seeds_lexical"] = load_seeds_bm25(folder, aids, index.pool, rows, entries_sha256=entries_sha256)
    return out
