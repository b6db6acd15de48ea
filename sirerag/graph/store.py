"""Saving and loading the entity graph in an index directory (``graph/``).

Layout (nothing pickled)::

    graph/graph.json              format version, settings, counts, embedder spec
    graph/nodes.jsonl             one line per node: {"kind", "name", "passages"}
    graph/node_names.json, entity_passages.npy   the same names and counts, read faster by a search
    graph/adjacency_indptr.npy    CSR arrays of the symmetric weighted adjacency
    graph/adjacency_indices.npy
    graph/adjacency_data.npy
    graph/facts.jsonl             propositions with their entity node indices
    graph/fact_*.npy              the same entity nodes and each fact's passage node (graph.facts)
    graph/entity_embeddings.npy   one row per entity node
    graph/fact_embeddings.npy     one row per fact
    graph/seeds_bm25/, surface.json, tagger.json   what a query needs, precomputed (graph.query_aids)

The arrays are memory-mapped at load: a search touches only the pages it needs.
"""
from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config.sections import uses_rule_tagger
from sirerag.core.config import GraphConfig
from sirerag.core.config.dense import DenseConfig
from sirerag.core.errors import ConfigError, IndexFormatError, InputError
from sirerag.embedding.base import Embedder
from sirerag.core.io.files import loads_index_json, read_index_json
from sirerag.extraction.tagger import EntityTagger
from sirerag.graph.build import EntityGraph, GraphFact, build_graph
from sirerag.graph.facts import FactTable, save_fact_arrays
from sirerag.graph.meta import GRAPH_FORMAT, GraphMeta
from sirerag.graph.name_vectors import ENTITY_EMBEDDINGS, NameVectorWriter
from sirerag.graph.query_aids import check_aid_paths, save_query_aids
from sirerag.graph.surface import MIN_FORM_CHARS, surface_forms
from sirerag.core.io import load_npy, read_json, read_jsonl, save_npy, write_json, write_jsonl
from sirerag.core.types import Document, Pool, Proposition
from sirerag.pool.store import ENTRIES, PROPOSITIONS

logger = logging.getLogger(__name__)

GRAPH_DIR = "graph"
_META = "graph.json"
_NODES = "nodes.jsonl"
_FACTS = "facts.jsonl"
_NAMES, _COUNTS = "node_names.json", "entity_passages.npy"  # nodes.jsonl's names and counts, faster read
_CSR = ("indptr", "indices", "data")


def save_graph(directory: str | Path, graph: EntityGraph, *, names_written: bool = False,
               **meta: Any) -> dict[str, Any]:  # Any: JSON values
    """Write ``graph`` into ``directory`` (created if missing); returns the metadata written. With
    ``names_written`` its ``entity_embeddings.npy`` is there already (:class:`~sirerag.graph.name_vectors.
    NameVectorWriter` wrote it, and the graph's rows are mapped from it)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    adj = graph.adjacency.tocsr()
    save_npy(directory / "adjacency_indptr.npy", adj.indptr.astype(np.int64))
    save_npy(directory / "adjacency_indices.npy", adj.indices.astype(np.int64))
    save_npy(directory / "adjacency_data.npy", np.asarray(adj.data, dtype=np.float64))
    if not names_written:
        save_npy(directory / ENTITY_EMBEDDINGS, np.asarray(graph.entity_embeddings, dtype=np.float32))
    save_npy(directory / "fact_embeddings.npy", np.asarray(graph.fact_embeddings, dtype=np.float32))
    write_jsonl(directory / _NODES, itertools.chain(  # a line at a time: no list of every node's record
        ({"kind": "entity", "name": name, "passages": int(c)}
         for name, c in zip(graph.entities, graph.entity_passages)),
        ({"kind": "passage", "name": pid} for pid in graph.passages)))
    write_json(directory / _NAMES, [*graph.entities, *graph.passages])
    save_npy(directory / _COUNTS, np.asarray(graph.entity_passages, dtype=np.int64))
    write_jsonl(directory / _FACTS, ({"id": f.id, "text": f.text, "passage": f.passage,
                                      "entities": list(f.entities)} for f in graph.facts))
    save_fact_arrays(directory, graph.facts, graph.passage_index, directory / _FACTS)
    info = {"format": GRAPH_FORMAT, "stats": graph.stats, **meta}
    write_json(directory / _META, info)  # last: its presence marks a complete graph
    return info


def _rows(path: Path) -> list[dict[str, Any]]:
    """The records of a graph file: the whole file parsed as one JSON array (about three times faster than
    line by line on the graph's 50k-line files, which a search reads at start); a file that does not parse
    so, one object per line, is read line by line, whose error names the line."""
    try:
        lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
        rows = loads_index_json(b"[" + b",".join(lines) + b"]")
        if len(rows) == len(lines) and all(isinstance(row, dict) for row in rows):
            return rows
    except (OSError, ValueError, RecursionError):
        pass
    try:
        return list(read_jsonl(path))
    except InputError as exc:
        raise IndexFormatError(str(exc)) from exc


def _nodes(directory: Path) -> tuple[list[str], list[str], np.ndarray]:
    """``(entity names, passage ids, passages per entity)``: from ``node_names.json`` and
    ``entity_passages.npy`` (one parse of a list of strings: a tenth of the time of ``nodes.jsonl``'s
    objects), or from ``nodes.jsonl`` for a graph saved before them."""
    if (directory / _NAMES).is_file() and (directory / _COUNTS).is_file():
        names, counts = read_index_json(directory / _NAMES), np.asarray(load_npy(directory / _COUNTS))
        if not isinstance(names, list) or counts.ndim != 1 or len(counts) > len(names) \
                or not set(map(type, names)) <= {str}:
            raise IndexFormatError(f"{directory}: {_NAMES} and {_COUNTS} do not describe the graph's nodes")
        return names[:len(counts)], names[len(counts):], counts.astype(np.int64, copy=False)
    nodes = _rows(directory / _NODES)
    entities = [n["name"] for n in nodes if n["kind"] == "entity"]
    passages = [n["name"] for n in nodes if n["kind"] == "passage"]
    if [n["kind"] for n in nodes] != ["entity"] * len(entities) + ["passage"] * len(passages):
        raise IndexFormatError(f"{directory / _NODES}: entity nodes must come before passage nodes")
    return entities, passages, np.array([n.get("passages", 0) for n in nodes[: len(entities)]], dtype=np.int64)


def load_graph(directory: str | Path, *, facts: bool = True) -> tuple[EntityGraph, GraphMeta]:
    """Read a graph written by :func:`save_graph`; returns ``(graph, its graph.json)``. With ``facts=False`` the
    facts and their embeddings are not read (the graph has none): what a search without fact linking needs.

    Raises:
        IndexFormatError: a file is missing, of another format version, or inconsistent.
    """
    directory = Path(directory)
    if not (directory / _META).is_file():
        raise IndexFormatError(f"{directory} holds no entity graph ({_META} is missing); "
                               "rebuild the index with --graph")
    meta = GraphMeta.from_dict(read_json(directory / _META), directory / _META)
    check_aid_paths(directory, meta.query_aids, directory / _META)
    entities, passages, counts = _nodes(directory)
    n = len(entities) + len(passages)
    indptr, indices, data = (load_npy(directory / f"adjacency_{part}.npy", mmap=True) for part in _CSR)
    if indptr.shape != (n + 1,) or indices.shape != data.shape or int(indptr[-1]) != indices.shape[0] \
            or (indices.size and (indices.min() < 0 or indices.max() >= n)):
        raise IndexFormatError(f"{directory}: adjacency arrays do not describe a {n}-node CSR matrix")
    adjacency = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    ent_emb = load_npy(directory / ENTITY_EMBEDDINGS, mmap=True)
    read_facts: Sequence[GraphFact] = ()
    if facts:
        read_facts = FactTable.open(directory, directory / _FACTS, passages, len(entities)) or tuple(
            GraphFact(id=r["id"], text=r["text"], passage=r["passage"], entities=tuple(r["entities"]))
            for r in _rows(directory / _FACTS))  # a graph saved before the fact arrays
    fact_emb = load_npy(directory / "fact_embeddings.npy", mmap=True) if facts else \
        np.zeros((0, ent_emb.shape[1]), np.float32)
    if ent_emb.shape[0] != len(entities) or fact_emb.shape[0] not in (0, len(read_facts)):
        raise IndexFormatError(f"{directory}: embeddings have {ent_emb.shape[0]} entity and {fact_emb.shape[0]} "
                               f"fact rows for {len(entities)} entities and {len(read_facts)} facts")
    graph = EntityGraph(entities=tuple(entities), passages=tuple(passages), adjacency=adjacency,
                        entity_passages=counts, facts=read_facts, entity_embeddings=ent_emb,
                        fact_embeddings=fact_emb, stats=meta.stats)
    return graph, meta


def name_embedder(config: GraphConfig, embedder: Embedder) -> Embedder | None:
    """The embedder of the entity names when it is not ``embedder``, else None. ``graph.name_vectors``:
    ``int8``, MiniLM's int8 export (:func:`~sirerag.embedding.query_export.load_minilm_int8`); ``static``, the
    static embedder distilled from MiniLM (:mod:`~sirerag.embedding.static`); ``auto``, ``int8`` when
    ``embedder`` is MiniLM in float32 or bfloat16, else the index embedder.

    Raises:
        ConfigError: ``int8`` or ``static`` with an index embedder whose vectors are not MiniLM's size.
    """
    from sirerag.embedding.precision import precision_of
    from sirerag.embedding.query_export import load_minilm_int8
    from sirerag.embedding.sentence_transformers import MINILM_SPEC

    choice = config.name_vectors
    spec = str(getattr(embedder, "spec", ""))
    if choice == "auto":
        minilm = spec.split("#")[0] == MINILM_SPEC and precision_of(spec) != "int8"
        choice = "int8" if minilm else "index"
    if choice == "index":
        return None
    names: Embedder
    if choice == "int8":
        names = load_minilm_int8()
    else:
        from sirerag.embedding.static import load_minilm_static

        names = load_minilm_static()
    dim = int(getattr(embedder, "dim", names.dim))
    if dim != names.dim:
        raise ConfigError(f"graph.name_vectors = {choice!r} gives {names.dim}-dimensional name vectors and the "
                          f"index embedder {spec or '?'} {dim}: use it with a MiniLM index")
    return names


def load_name_embedder(meta: GraphMeta) -> Embedder | None:
    """The embedder a graph's entity names were embedded with when it is not the index embedder (the
    ``name_embedder`` its ``graph.json`` records), loaded; else None."""
    if not meta.name_embedder:
        return None
    from sirerag.embedding.query_export import INT8_SUFFIX, load_minilm_int8
    from sirerag.embedding.static import load_static_for

    if meta.name_embedder.endswith(INT8_SUFFIX):
        return load_minilm_int8()
    return load_static_for(meta.name_embedder)


def build_and_save_graph(out: str | Path, documents: Sequence[Document], propositions: Iterable[Proposition], *,
                         embedder: Embedder, config: GraphConfig, pool: Pool | None = None,
                         chunk_texts: Iterable[str] | None = None, ner: str = "rules",
                         names: Embedder | None = None, ann: DenseConfig | None = None) -> dict[str, Any]:
    """Build the entity graph of an index and write it to ``<out>/graph``.

    Args:
        out: the index directory.
        documents: the corpus; each document is a passage node.
        propositions: the build's propositions (offline or LLM extractor alike), read once.
        embedder: the index embedder (entity and fact embeddings, synonym edges).
        config: a :class:`sirerag.core.config.GraphConfig`.
        pool, chunk_texts, ner: the index's pool, its chunk texts and ``extraction.ner``: with them the
            query aids are stored too (:mod:`sirerag.graph.query_aids`: the passage-seed BM25 index, the
            surface forms, the rule tagger's counts), so a search starts without rebuilding them.
        names: the embedder of the entity names as the caller resolved it with :func:`name_embedder` (an update
            passes the old graph's, answering its names from their stored rows); None: resolved here.
        ann: the HNSW parameters of the synonym kNN over many names (``config.synonym_ann_min_names``; the
            build passes its ``[dense]`` section; default ``DenseConfig()``'s).

    Returns:
        The component record for the manifest (``path``, ``type``, settings, counts, seconds).
    """
    start = time.perf_counter()
    names = names if names is not None else name_embedder(config, embedder)
    writer = NameVectorWriter(Path(out) / GRAPH_DIR)  # the names' rows straight to their file, in slices
    graph = build_graph([d.id for d in documents], propositions, titles=[d.title for d in documents],
                        title_weight=config.title_weight, embedder=embedder, embed_facts=config.embed_facts,
                        synonym_threshold=config.synonym_threshold,
                        synonym_max_neighbors=config.synonym_max_neighbors, name_embedder=names,
                        name_vectors=writer, synonym_ann_min_names=config.synonym_ann_min_names, ann=ann)
    settings: dict[str, Any] = {"title_weight": config.title_weight, "embed_facts": config.embed_facts,
                "synonym_threshold": config.synonym_threshold,
                "synonym_max_neighbors": config.synonym_max_neighbors,
                "damping": config.damping, "tol": config.tol, "max_iter": config.max_iter}
    if names is not None:  # recorded only when set, so a default graph's record is what it was
        settings["name_vectors"] = config.name_vectors
    start_save = time.perf_counter()
    aids = save_query_aids(
        Path(out) / GRAPH_DIR, pool=pool, passage_index=graph.passage_index,
        surface_forms=surface_forms(graph.entities, min_chars=MIN_FORM_CHARS), min_chars=MIN_FORM_CHARS,
        tagger_counts=EntityTagger().fit(chunk_texts).to_counts() if chunk_texts is not None and uses_rule_tagger(ner)
        else None, fact_ids=[f.id for f in graph.facts], propositions=Path(out) / PROPOSITIONS,
        entries=Path(out) / ENTRIES)
    graph.stats.setdefault("seconds", {})["query_aids"] = round(time.perf_counter() - start_save, 3)
    start_save = time.perf_counter()
    extra = {"name_embedder": names.spec} if names is not None else {}
    meta = save_graph(Path(out) / GRAPH_DIR, graph, names_written=writer.written,
                      embedder=getattr(embedder, "spec", None), settings=settings, query_aids=aids, **extra)
    graph.stats.setdefault("seconds", {})["save"] = round(time.perf_counter() - start_save, 3)
    seconds = round(time.perf_counter() - start, 3)
    logger.info("entity graph written to %s in %.1fs", Path(out) / GRAPH_DIR, seconds)
    return {"type": "entity_graph", "path": GRAPH_DIR, "format": GRAPH_FORMAT, "embedder": meta["embedder"],
            "settings": settings, "stats": graph.stats, "seconds": seconds}
