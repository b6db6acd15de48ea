"""Loading a :class:`~sirerag.graph.bridging.PropositionBridge` from an index: the facts' vectors from the stored
proposition vectors (memory-mapped, by the fact rows the graph stored), else embedded now."""
from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from sirerag.core.io import load_npy
from sirerag.core.io.files import scattered_map
from sirerag.graph.bridging import PropositionBridge
from sirerag.graph.build import EntityGraph

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.pool.loaded import LoadedIndex

logger = logging.getLogger(__name__)


def load_bridge(index: LoadedIndex, graph: EntityGraph, embedder: Embedder, aids: dict[str, Any] | None = None, *,
                title_weight: float, synonym_threshold: float) -> PropositionBridge:
    """Bridging over the graph's facts of a loaded index (with facts), with its stored proposition vectors
    where it has them; facts without a stored vector are embedded now (with a warning). ``title_weight``: the
    graph's (its ``settings``), from which its title edges are read (:meth:`EntityGraph.title_edges`).

    ``aids`` is the graph's ``query_aids`` record: with its fact rows (:func:`~sirerag.graph.query_aids.load_fact_rows`)
    the vectors are taken from the memory-mapped ``propositions.npy`` without reading the propositions."""
    from sirerag.graph.query_aids import load_fact_rows
    from sirerag.graph.store import GRAPH_DIR
    from sirerag.pool.store import PROPOSITIONS
    from sirerag.trees.proposition_vectors import PROPOSITION_VECTORS, load_proposition_vectors, vectors_for

    # bridging gathers a few names' rows; linking scans them all through the graph's own map
    with index.reading() if index is not None else contextlib.nullcontext():  # the loaded commit's file
        entity_vectors = scattered_map(graph.entity_embeddings)
    nodes = {"title_nodes": graph.title_edges(title_weight), "passage_index": graph.passage_index,
             "adjacency": graph.adjacency, "entity_vectors": entity_vectors, "synonym_threshold": synonym_threshold}
    if len(graph.facts) and len(graph.fact_embeddings) == len(graph.facts):  # stored with the graph
        return PropositionBridge(graph.facts, graph.fact_embeddings, graph.entity_passages, **nodes)
    component, record = index.manifest.component("proposition_vectors"), index.manifest.files.get(PROPOSITIONS)
    stored_rows = component.rows if component is not None else None
    if aids and stored_rows is not None and record is not None:
        with index.reading():  # the rows of the loaded commit
            rows = load_fact_rows(index.path / GRAPH_DIR, aids, facts=len(graph.facts),
                                  propositions_sha256=record.sha256, vectors=stored_rows)
            if rows is not None:
                vectors = load_npy(index.path / PROPOSITION_VECTORS, mmap=True, scattered=True)
                if vectors.ndim == 2 and vectors.shape[0] == stored_rows:
                    return PropositionBridge(graph.facts, vectors, graph.entity_passages, rows=rows, **nodes)
    props = list(index.propositions())
    with index.reading():  # the vectors of the loaded commit
        stored = load_proposition_vectors(index.path, len(props))
    known = {p.id: r for p, r in zip(props, stored)} if stored is not None else {}
    if not known:
        logger.warning("%s: no stored proposition vectors; embedding %d facts for bridging (rebuild the index to "
                       "store them)", index.path, len(graph.facts))
    # a fact is a proposition with entities: its id is the proposition's
    return PropositionBridge(graph.facts, vectors_for(graph.facts, known, embedder), graph.entity_passages,
                             **nodes)
