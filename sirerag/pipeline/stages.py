"""The stage runners that write an index: the build's, and what it shares with the update's.

:class:`IndexWriter` holds what a run hands from stage to stage and writes the stages both
runners run alike: the pool (entries, embeddings, the ``pool`` component and its counts),
BM25, the entity graph and the manifest. :class:`BuildRunner` adds the build's own stages
(:mod:`sirerag.pipeline.update` has the incremental ones). Each stage method takes its
:class:`~sirerag.pipeline.plan.Stage`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from sirerag.core.config import BuildConfig
from sirerag.core.errors import SireragError
from sirerag.core.io import write_manifest
from sirerag.core.io.manifest import Manifest
from sirerag.core.io.mapped import map_npy
from sirerag.pool.bm25 import save_bm25
from sirerag.pipeline.models import Models
from sirerag.pipeline.plan import Stage
from sirerag.pipeline.resources import MemoryMeter
from sirerag.pool.store import (CHUNKS, DOCUMENTS, EMBEDDINGS, ENTRIES, PROPOSITIONS, read_records, save_pool,
                                save_records)
from sirerag.trees.base import TreeResult
from sirerag.core.types import Chunk, Document, Pool, Proposition
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)


class IndexWriter:
    """What the stages of one run hand on, and the stages a build and an update share.

    ``out`` is the staging folder; ``components`` and ``counts`` become the manifest's.
    """

    def __init__(self, out: Path, config: BuildConfig, models: Models, *, show_progress: bool = False) -> None:
        self.out, self.config, self.models, self.show_progress = out, config, models, show_progress
        self.documents: Sequence[Document] = ()
        self.chunks: list[Chunk] = []
        self.propositions: list[Proposition] = []
        self.proposition_vectors: np.ndarray | None = None  # rows of ``propositions.npy``, once embedded
        self.retrieval_pool: Pool | None = None
        self.components: dict[str, Any] = {}
        self.counts: dict[str, Any] = {}
        self.meter = MemoryMeter()  # the run's peak memory, by stage (its hook wraps the walk's on_stage)

    def write_pool(self, pool: Pool) -> None:
        """Write the pool's entries and embeddings; record its component and counts."""
        save_pool(self.out, pool)
        self.wrote_pool(pool)

    def wrote_pool(self, pool: Pool) -> None:
        """Keep the pool whose files are written (its vectors mapped from them where it can) for the later
        stages; record its component and counts."""
        self.retrieval_pool = pool
        self.meter.track(pool.embeddings)
        self.meter.track(getattr(pool.entries, "raw", None))  # entries read lazily: the pages a scan read
        self.components["pool"] = {"type": "pool", "entries": ENTRIES, "embeddings": EMBEDDINGS}
        self.counts["pool"] = {"entries": len(pool), "by_tree_kind_level": pool.counts()}

    def bm25(self, stage: Stage) -> None:
        """The lexical index, stored so a search only loads it."""
        assert self.retrieval_pool is not None, "the pool stage runs before bm25"
        self.components["bm25"] = save_bm25(self.out, (e.text for e in self.retrieval_pool.scan()))

    def ann(self, stage: Stage) -> None:
        """The approximate dense index, for a pool of ``dense.ann_min_vectors`` vectors or more; a smaller pool
        has none (an update that shrinks the pool below the size drops it)."""
        assert self.retrieval_pool is not None, "the pool stage runs before ann"
        self.components.pop("ann", None)
        vectors = self.retrieval_pool.embeddings
        if self.config.dense.builds_ann(int(vectors.shape[0])):
            from sirerag.pool.ann import save_ann

            self.components["ann"] = save_ann(self.out, vectors, self.config.dense)

    def graph(self, stage: Stage) -> None:
        from sirerag.graph.store import build_and_save_graph
        from sirerag.trees.proposition_vectors import vectors_for

        if self.proposition_vectors is None and self.propositions:  # no relatedness tree embedded them
            # the graph's facts are propositions, and PPR's bridging reads their rows (propositions.npy)
            self.write_proposition_vectors(vectors_for(self.propositions, self.known_proposition_rows(),
                                                       self.models.short_text_embedder()))
        embedder = self.graph_embedder()
        self.components["graph"] = build_and_save_graph(
            self.out, self.documents, self.graph_propositions(), embedder=embedder,
            config=self.config.graph, pool=self.retrieval_pool, chunk_texts=self.chunk_texts(),
            ner=self.config.extraction.ner, names=self.graph_name_embedder(embedder), ann=self.config.dense)

    def chunk_texts(self) -> Iterable[str]:
        """The chunks' texts, in order (the graph's rule tagger counts their words)."""
        return (c.text for c in self.chunks)

    def graph_propositions(self) -> Iterable[Proposition]:
        """The propositions, in order, for the graph (which reads them once)."""
        return self.propositions

    def known_proposition_rows(self) -> dict[str, np.ndarray]:
        """Rows of propositions embedded before, by proposition id (a build has none; an update, its index's)."""
        return {}

    def graph_embedder(self) -> Embedder:
        """The embedder of the graph's entities and facts; facts reuse the proposition rows."""
        return self.with_proposition_rows(self.models.short_text_embedder())

    def graph_name_embedder(self, embedder: Embedder) -> Embedder | None:
        """The embedder of the graph's entity names when it is not ``embedder`` (``graph.name_vectors``), else None;
        its vectors are cached with the build's other embeddings."""
        from sirerag.graph.store import name_embedder

        names = name_embedder(self.config.graph, embedder)
        return None if names is None else self.models.cached("name_embedder", names)

    def with_proposition_rows(self, embedder: Embedder) -> Embedder:
        """``embedder``, answering the texts of embedded propositions from their rows when the graph embeds its
        facts (``graph.embed_facts``; without them the table of rows by text, about 1.6 KiB per passage, would
        serve no text: an entity name that is a whole proposition is embedded as any other name)."""
        from sirerag.pipeline.update_trees import KnownEmbedder
        from sirerag.trees.proposition_vectors import rows_by_text

        if self.proposition_vectors is None or not self.config.graph.embed_facts:
            return embedder
        rows = rows_by_text(self.propositions, self.proposition_vectors)
        if isinstance(embedder, KnownEmbedder):
            embedder.rows.update(rows)
            return embedder
        return KnownEmbedder(embedder, rows)

    def write_proposition_vectors(self, rows: np.ndarray) -> None:
        """Keep and write the proposition rows (``propositions.npy``, aligned with ``propositions.jsonl``)."""
        from sirerag.trees.proposition_vectors import PROPOSITION_VECTORS, save_proposition_vectors

        save_proposition_vectors(self.out, rows)
        # the later stages read the rows from the file: memory-mapped, they need not all stay in memory
        self.proposition_vectors = map_npy(self.out / PROPOSITION_VECTORS, index=self.out)
        self.meter.track(self.proposition_vectors)
        self.components["proposition_vectors"] = {"type": "proposition_vectors", "path": PROPOSITION_VECTORS,
                                                  "rows": int(rows.shape[0]),
                                                  "embedder": self.models.short_text_embedder().spec}

    def write_manifest(self, manifest: Manifest | None = None, **content: Any) -> Manifest:  # Any: JSON values
        """Close the models' caches, then write the manifest (the last file of a run): ``manifest`` (an
        update's, read back) with the sections of ``content`` and this run's ``resources`` over it."""
        self.models.close()
        return write_manifest(self.out, manifest, **content, resources=self.meter.record())


class BuildRunner(IndexWriter):
    """The real stages of a build, writing into the staging folder ``out``."""

    def __init__(self, corpus: str | Path | Sequence[Document], out: Path, config: BuildConfig, models: Models, *,
                 show_progress: bool = False) -> None:
        super().__init__(out, config, models, show_progress=show_progress)
        self.corpus = corpus
        self.leaf_embeddings: np.ndarray | None = None
        self.trees: dict[str, TreeResult] = {}
        self.query_export_record: dict[str, Any] | None = None
        self.extractor: str | None = None
        self.released: set[str] = set()  # records the pool stage dropped, read back from these files

    def load(self, stage: Stage) -> None:
        from sirerag.text.chunking import chunk_documents
        from sirerag.corpus.load import load_corpus

        corpus = self.corpus
        self.documents = list(corpus) if not isinstance(corpus, (str, Path)) else \
            load_corpus(corpus, warn_passage_bytes=self.config.chunking.warn_passage_bytes,
                        follow_outside_links=self.config.corpus.follow_outside_links)
        self.chunks = chunk_documents(self.documents, self.config.chunking)
        save_records(self.out, DOCUMENTS, self.documents)
        save_records(self.out, CHUNKS, self.chunks)
        self.counts.update(documents=len(self.documents), chunks=len(self.chunks))

    def query_export(self, stage: Stage) -> None:
        export = query_export(self.config.embedder.precision)
        if export is not None:  # what the index needs to know; whether this run wrote it is in the log only,
            # so the same input gives the same manifest (its time is in ``timings``)
            self.query_export_record = {k: export[k] for k in ("backend", "key")}

    def embed_leaves(self, stage: Stage) -> None:
        self.leaf_embeddings = self.models.embedder().encode_documents([c.text for c in self.chunks])

    def similarity_tree(self, stage: Stage) -> None:
        from sirerag.trees.similarity import build_similarity_tree

        config = self.config
        assert self.leaf_embeddings is not None, "embed_leaves runs before similarity_tree"
        tree = build_similarity_tree(self.chunks, self.leaf_embeddings, embedder=self.models.embedder(),
                                     summarizer=self.models.summarizer(), clustering=config.clustering,
                                     tree=config.tree, random_state=config.seed, show_progress=self.show_progress)
        self.trees["similarity"] = tree
        self.counts["similarity_tree"] = tree.stats.to_dict()
        self.leaf_embeddings = None  # the tree's matrix holds a copy of them (the pool takes them from it)

    def extraction(self, stage: Stage) -> None:
        from sirerag.extraction import extract

        result = extract(self.chunks, self.documents, config=self.config.extraction,
                         llm=self.models.extraction_llm(), out=self.out, show_progress=self.show_progress)
        self.propositions = list(result.propositions)
        save_records(self.out, PROPOSITIONS, self.propositions)
        self.counts["extraction"] = result.stats
        self.extractor = result.spec

    def relatedness_tree(self, stage: Stage) -> None:
        from sirerag.trees.proposition_vectors import embed_propositions
        from sirerag.trees.relatedness import build_relatedness_tree

        config = self.config
        self.write_proposition_vectors(embed_propositions(self.models.short_text_embedder(), self.propositions))
        tree = build_relatedness_tree(self.propositions, embedder=self.models.embedder(),
                                      summarizer=self.models.summarizer(), clustering=config.clustering,
                                      tree=config.tree, relatedness=config.relatedness, random_state=config.seed,
                                      show_progress=self.show_progress, proposition_vectors=self.proposition_vectors)
        self.trees["relatedness"] = tree
        self.counts["relatedness_tree"] = tree.stats.to_dict()

    def pool(self, stage: Stage) -> None:
        from sirerag.pool.store import write_flat_pool
        from sirerag.trees.similarity import leaves_from_chunks

        leaves = self.trees.get("similarity")
        if leaves is None:  # no similarity tree: the pool's leaves are the chunks and their vectors
            assert self.leaf_embeddings is not None, "embed_leaves runs before pool"
            leaves = leaves_from_chunks(self.chunks, self.leaf_embeddings)
        trees = [leaves]
        self.wrote_pool(write_flat_pool(self.out, trees + [self.trees[t] for t in ("relatedness",) if t in self.trees]))
        # the pool holds every node and row now: the trees' own copies are not kept for the later stages, nor the
        # chunks, nor (once embedded, and unless the graph embeds its facts from their rows) the propositions: the
        # graph reads them back from their files, a line at a time
        self.trees.clear()
        self.leaf_embeddings = None
        self.chunks = []
        self.released.add(CHUNKS)
        if self.proposition_vectors is not None and not self.config.graph.embed_facts:
            self.propositions = []
            self.released.add(PROPOSITIONS)

    def chunk_texts(self) -> Iterable[str]:
        if CHUNKS not in self.released:
            return super().chunk_texts()
        return (record["text"] for _, record in read_records(self.out, CHUNKS))

    def graph_propositions(self) -> Iterable[Proposition]:
        if PROPOSITIONS not in self.released:
            return super().graph_propositions()
        return (Proposition.from_dict(record) for _, record in read_records(self.out, PROPOSITIONS))

    def models_record(self) -> dict[str, Any]:
        """The manifest's record of the models used: embedder, summariser ("none" when no stage
        summarised), LLM and (with an extraction stage) extractor."""
        embedder = self.models.embedder()
        record: dict[str, Any] = {"embedder": {"spec": embedder.spec, "load_spec": self.config.embedder.spec,
                                               "dim": embedder.dim}}
        if self.query_export_record is not None:
            record["embedder"]["query_export"] = self.query_export_record
        summarizer, llm = self.models.opened("summarizer"), self.models.opened("llm")
        record.update(summarizer=summarizer.spec if summarizer is not None else "none",
                      llm=llm.spec if llm is not None else None)
        if self.extractor is not None:
            record["extractor"] = self.extractor
        return record


def query_export(precision: str = "float32") -> dict[str, Any] | None:
    """Export MiniLM to ONNX for fast dense searches, once per machine; best effort: a build never
    fails for it. None when the packages for it are missing. With ``precision`` ``int8`` it is the int8 export
    the build embeds with and its searches encode with (which fails the build when it cannot be made)."""
    from sirerag.embedding.query_export import ensure_minilm_int8_export, ensure_minilm_query_export, export_available

    if precision == "int8":
        return ensure_minilm_int8_export()

    if not export_available():
        logger.info("no ONNX export of MiniLM for fast dense searches: onnx, onnxruntime or tokenizers is not "
                    "installed (pip install 'sirerag[local]')")
        return None
    try:
        return ensure_minilm_query_export()
    except (SireragError, RuntimeError, OSError, ValueError) as exc:  # torch's exporter raises RuntimeErrors
        logger.warning("the ONNX export of MiniLM for fast dense searches failed; searches load torch: %s", exc)
        return None
