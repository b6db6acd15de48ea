"""``sirerag add`` / ``sirerag remove``: change an index's documents without rebuilding it.

The update runs like a build, as one transaction (:func:`sirerag.core.io.staging.staged_index`):
under the index's write lock it reads the old index, writes the updated one into a staging
folder and swaps it in, so a killed update leaves the old index as it was and a rerun
completes (the embedding and LLM call caches keep what was paid for).

- New documents are chunked and embedded; old leaves keep their stored rows.
- Similarity tree: :func:`sirerag.trees.incremental.update_tree` (centroid assignment, only
  changed clusters re-summarised, upward propagation, splits over the token limit).
- Relatedness tree: propositions are extracted for the new chunks only (the offline tagger is
  fitted on all chunks, as a build would); the aggregates are recomputed from all stored
  propositions (no model call; an untouched entity gives the same text, so the same id) and the
  summary levels above them updated like the similarity tree.
- BM25 and (when the index has one) the entity graph are rebuilt from the stored records: old names
  and facts keep their stored rows, new names are embedded by the graph's name embedder. A ColBERT
  index no longer matches the pool and is dropped (``sirerag index`` builds it again).
- The manifest keeps the build's settings and records the change in ``history`` and ``drift``.

The update walks the build plan of the index's settings
(:meth:`~sirerag.pipeline.plan.BuildPlan.from_config`) with the incremental runner
(:class:`IncrementalRunner`), so it runs the stages a build with those settings runs.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from sirerag.core.config import BuildConfig, CorpusConfig
from sirerag.core.errors import ConfigError, SireragError
from sirerag.embedding.precision import precision_of
from sirerag.extraction.extractor import FAILURES, REWRITES
from sirerag.core.io import write_jsonl
from sirerag.core.io.manifest import Corpus
from sirerag.core.io.staging import staged_index
from sirerag.pipeline.endpoints import check_endpoints
from sirerag.pipeline.changes import (DEFAULT_DRIFT_WARN, DEFAULT_REFRESH_THRESHOLD, Plan, UpdateConfig,
                                      merged_records, plan_changes, record_change)
from sirerag.pipeline.models import Models, cache_folder, kept_folders
from sirerag.pipeline.plan import BuildPlan, Stage, StageHook
from sirerag.pipeline.stages import IndexWriter
from sirerag.pipeline.update_trees import GraphRows, KnownEmbedder, TreeUpdate
from sirerag.pool.current import check_current
from sirerag.pool.store import CHUNKS, DOCUMENTS, PROPOSITIONS, save_records, write_flat_pool
from sirerag.pool.loaded import LoadedIndex, load_index
from sirerag.trees.base import Summarizer, TreeResult
from sirerag.core.types import Chunk, Document
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpdateReport:
    """What an add or remove did (``changed`` is False when the index was left as it was)."""

    out: Path
    changed: bool
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    drift: dict[str, Any] = field(default_factory=dict)
    drift_warning: str | None = None


class _Unchanged(Exception):
    """Raised inside the staging block when there is nothing to write."""


def update_index(index: str | Path, *, add: str | Path | Sequence[Document] | None = None,
                 remove: Iterable[str] = (), cache_dir: str | Path | None = None, summarizer: Summarizer | None = None,
                 drift_warn: float = DEFAULT_DRIFT_WARN, refresh_threshold: float = DEFAULT_REFRESH_THRESHOLD,
                 sync: bool = False, follow_outside_links: bool = False, show_progress: bool = False,
                 on_stage: StageHook | None = None) -> UpdateReport:
    """Add and/or remove documents of an index in place.

    Args:
        index: the index directory (written by ``sirerag build``).
        add: a corpus path or documents to add (same id and text: skipped; same id, other text: updated).
            A folder's documents are keyed by their relative paths (:mod:`sirerag.corpus.load`): the
            documents of a file it still has that it no longer gives (a removed Markdown section) are
            removed too.
        remove: document ids to remove.
        cache_dir: the model-call caches (default ``<index>/cache``, as for the build).
        summarizer: replaces the summariser the build's settings name (tests, benchmarks).
        drift_warn: share of leaves changed since the last full build past which a warning is logged.
        refresh_threshold: share of a changed cluster's member tokens up to which it keeps its summary
            text (:class:`~sirerag.pipeline.changes.UpdateConfig`); 0 rewrites every changed cluster.
        sync: with a folder ``add``, also remove the documents this folder gave (their ``source`` record
            names it) whose files give none now (deleted, emptied or skipped).
        follow_outside_links: in a folder, also read the files symbolic links lead to outside it
            (``corpus.follow_outside_links`` for this update; the index's build setting is not used).
        show_progress: progress bars.
        on_stage: called around every stage, as for :func:`~sirerag.pipeline.build.build_index`.

    Raises:
        ConfigError: ``refresh_threshold`` or ``drift_warn`` is out of range, ``follow_outside_links`` is not
            a bool, or ``sync`` without a folder to add; nothing changes.
        InputError: an id to remove is not in the index, or the corpus is invalid; nothing changes.
        IndexFormatError: the index is not readable.
        IndexLockedError: another process is writing it.
        SireragError: the index uses a relatedness variant the update does not support.
    """
    settings = UpdateConfig(refresh_threshold=refresh_threshold, drift_warn=drift_warn).validate()
    corpus = CorpusConfig(follow_outside_links=follow_outside_links)
    corpus.validate()
    if sync and not (isinstance(add, (str, Path)) and Path(add).is_dir()):
        raise ConfigError(f"--sync keeps an index in step with a folder; {add!r} is not a folder")
    out = Path(index)
    cache = cache_folder(out, cache_dir)
    command = "add" if add is not None else "remove"
    start = time.perf_counter()
    inputs = (add,) if isinstance(add, (str, Path)) else ()
    try:
        with staged_index(out, command=command, keep=kept_folders(out, cache), inputs=inputs,
                          option="INDEX") as stage:
            report = _update(out, stage, add, remove, cache, summarizer, command, settings, show_progress,
                             on_stage, sync, corpus)
    except _Unchanged as exc:
        return UpdateReport(out=out, changed=False, counts=exc.args[0])
    report.timings["total"] = round(time.perf_counter() - start, 3)
    drift_warn = settings.drift_warn
    if report.drift.get("share", 0.0) > drift_warn:
        warning = (f"{report.drift['share']:.0%} of the leaves were added or removed since the last full build "
                   f"(over {drift_warn:.0%}); the incremental tree may drift from what a rebuild would cluster: "
                   f"consider sirerag build again")
        logger.warning("%s", warning)
        return UpdateReport(out=out, changed=True, counts=report.counts, timings=report.timings,
                            drift=report.drift, drift_warning=warning)
    return UpdateReport(out=out, changed=True, counts=report.counts, timings=report.timings, drift=report.drift)


def _update(out: Path, stage: Path, add: str | Path | Sequence[Document] | None, remove: Iterable[str], cache: Path,
            summarizer: Summarizer | None, command: str, settings: UpdateConfig, show_progress: bool,
            on_stage: StageHook | None,
            sync: bool = False, corpus: CorpusConfig = CorpusConfig()) -> UpdateReport:
    old = load_index(out)
    config = old.manifest.build_config(source=f"{out}/manifest.json").validate()
    # which files a folder gives is this command's choice, not the build's
    config = replace(config, corpus=corpus)
    check_current(old, "update")  # an index built by an older sirerag is rebuilt, not updated
    # new texts are embedded in the precision the index's own were, whatever this machine's CPU would choose
    precision = precision_of((old.manifest.embedder and old.manifest.embedder.spec) or "")
    config = replace(config, embedder=replace(config.embedder, precision=precision))
    check_endpoints(config)  # before the embedder loads
    if config.relatedness.include_propositions or (not config.relatedness.aggregates and
                                                   "relatedness" in config.trees):
        raise SireragError(f"{out}: add/remove supports the relatedness tree of aggregates (the default and "
                           "ablation A); this index puts propositions in the pool: rebuild it instead")
    load_spec = (old.manifest.embedder and old.manifest.embedder.load_spec) or config.embedder.spec
    timings: dict[str, float] = {}
    with Models(config, cache, show_progress=show_progress, embedder_spec=load_spec,
                summarizer=summarizer) as models:
        runner = IncrementalRunner(old, add, remove, stage, config, models, settings, show_progress=show_progress,
                                   sync=sync)
        try:
            BuildPlan.from_config(config).walk(runner, timings=timings,
                                               on_stage=runner.meter.hook(on_stage))
        finally:
            runner.meter.close()
        drift = runner.finish(command, settings)
    return UpdateReport(out=out, changed=True, counts=runner.update_counts, timings=timings, drift=drift)


class IncrementalRunner(IndexWriter):
    """The stages of an add/remove: the old index's records and pool, updated where documents changed."""

    def __init__(self, old: LoadedIndex, add: str | Path | Sequence[Document] | None, remove: Iterable[str], out: Path,
                 config: BuildConfig, models: Models, settings: UpdateConfig, *, show_progress: bool = False,
                 sync: bool = False) -> None:
        super().__init__(out, config, models, show_progress=show_progress)
        self.old, self.add, self.remove, self.sync = old, add, remove, sync
        self.manifest = old.manifest.copied()
        self.components = {name: c.to_dict() for name, c in self.manifest.components.items()}
        self.counts = self.manifest.counts.to_dict()
        self.vectors = {e.id: row for e, row in zip(old.pool.entries, old.pool.embeddings)}
        self.trees = TreeUpdate(old.pool.entries, self.vectors, config, models,
                                refresh_threshold=settings.refresh_threshold, staleness=self.manifest.staleness)
        self.change: Plan  # the documents added and removed (the load stage reads them)
        self.new_chunks: list[Chunk] = []
        self.update_counts: dict[str, Any] = {}

    def load(self, stage: Stage) -> None:
        from sirerag.text.chunking import chunk_documents
        from sirerag.corpus.load import load_corpus
        from sirerag.corpus.folder import stale_folder_ids

        add, config = self.add, self.config
        new_docs: Sequence[Document] = () if add is None else list(add) if not isinstance(add, (str, Path)) else \
            load_corpus(add, warn_passage_bytes=config.chunking.warn_passage_bytes,
                        follow_outside_links=config.corpus.follow_outside_links)
        old_docs = self.old.documents()
        remove = list(self.remove)
        if isinstance(add, (str, Path)) and Path(add).is_dir():  # a folder: its files' old sections go too
            remove += stale_folder_ids(old_docs, new_docs, add, sync=self.sync, index=self.old.path)
        self.change = plan = plan_changes(old_docs, add=new_docs, remove=remove)
        self.update_counts = {"documents_added": len(plan.added) - len(plan.updated),
                              "documents_updated": len(plan.updated),
                              "documents_removed": len(plan.removed) - len(plan.updated),
                              "documents_skipped": plan.skipped, "summaries_written": 0, "chunks_extracted": 0}
        if plan.empty:
            raise _Unchanged(self.update_counts)
        self.new_chunks = chunk_documents(plan.added, config.chunking)
        self.documents = plan.documents
        self.chunks = [c for c in self.old.chunks() if c.doc_id not in plan.removed] + self.new_chunks
        save_records(self.out, DOCUMENTS, self.documents)
        save_records(self.out, CHUNKS, self.chunks)
        self.counts.update(documents=len(self.documents), chunks=len(self.chunks))

    def query_export(self, stage: Stage) -> None:
        """Nothing to do: the index's record of the export is kept with its embedder."""

    def embed_leaves(self, stage: Stage) -> None:
        if self.new_chunks:
            rows = self.models.embedder().encode_documents([c.text for c in self.new_chunks])
            self.vectors.update({c.id: row for c, row in zip(self.new_chunks, np.asarray(rows, dtype=np.float32))})

    def similarity_tree(self, stage: Stage) -> None:
        self.trees.similarity(self.chunks)

    def extraction(self, stage: Stage) -> None:
        fresh, failures, rewrites = self._extract()
        self.propositions = [p for p in self.old.propositions() if p.doc_id not in self.change.removed] + fresh
        self.update_counts["chunks_extracted"] = len(self.new_chunks)
        save_records(self.out, PROPOSITIONS, self.propositions)
        old, removed = self.old.path, self.change.removed
        write_jsonl(self.out / FAILURES, merged_records(old / FAILURES, removed, failures))
        if rewrites or REWRITES in self.manifest.files:
            write_jsonl(self.out / REWRITES, merged_records(old / REWRITES, removed, rewrites))

    def _extract(self) -> tuple[list, list[dict[str, Any]], list[dict[str, Any]]]:
        """Propositions, failures and rewrite records of the new chunks only."""
        new_chunks, config = self.new_chunks, self.config
        if not new_chunks:
            return [], [], []
        if config.extraction.extractor == "offline":  # the rule tagger is fitted on all chunks, as in a build
            from sirerag.extraction.offline import extract_offline, offline_extractor

            extractor = offline_extractor(config.extraction.ner, lambda: (c.text for c in self.chunks))
            return extract_offline(new_chunks, self.change.added, extractor), [], []
        from sirerag.extraction import extract

        result = extract(new_chunks, self.change.added, config=config.extraction, llm=self.models.extraction_llm(),
                         out=None, show_progress=self.show_progress)
        return list(result.propositions), list(result.failures), list(result.rewrite_records)

    def relatedness_tree(self, stage: Stage) -> None:
        from sirerag.trees.proposition_vectors import vectors_for

        self.write_proposition_vectors(vectors_for(self.propositions, self.known_proposition_rows(),
                                                   self.models.short_text_embedder()))
        assert self.proposition_vectors is not None, "write_proposition_vectors sets them"
        self.trees.relatedness(self.propositions, self.proposition_vectors)

    def known_proposition_rows(self) -> dict[str, np.ndarray]:
        from sirerag.trees.proposition_vectors import load_proposition_vectors

        old_props = self.old.propositions()
        stored = load_proposition_vectors(self.old.path, len(old_props))
        return {} if stored is None else {p.id: row for p, row in zip(old_props, stored)}

    def pool(self, stage: Stage) -> None:
        if "similarity" not in self.trees.levels:  # no similarity tree: the leaves alone
            self.trees.similarity(self.chunks)
        empty = np.zeros((0, self.old.pool.embeddings.shape[1]), dtype=np.float32)
        rows = self.vectors
        self.wrote_pool(write_flat_pool(self.out, [
            TreeResult(nodes=tuple(nodes), embeddings=np.vstack([rows[n.id] for n in nodes]) if nodes else empty)
            for nodes in self.trees.pool_order()]))
        if self.components.pop("colbert", None) is not None:
            logger.warning("%s: the ColBERT index no longer matches the pool and was dropped; run sirerag index "
                           "again to rebuild it", self.old.path)

    def graph_embedder(self) -> Embedder:
        return self.with_proposition_rows(KnownEmbedder.from_graph(self.models.short_text_embedder(),
                                                                   self.old_graph_rows))

    def graph_name_embedder(self, embedder: Embedder) -> Embedder | None:
        names = super().graph_name_embedder(embedder)  # the build's, answering the old names from their rows
        return names if self.old_graph_rows is None else self.old_graph_rows.name_embedder_for(names)

    @cached_property
    def old_graph_rows(self) -> GraphRows | None:  # the old index's graph, read once by the graph stage
        return GraphRows.load(self.old.component("graph"))

    def finish(self, command: str, settings: UpdateConfig) -> dict[str, Any]:
        """Count the change, record it in the manifest's history and drift, write the manifest; returns the drift."""
        trees, changes = self.trees, self.update_counts
        assert self.retrieval_pool is not None, "the pool stage runs before finish"
        changes["summaries_written"] = trees.written
        changes["summaries_stale"] = sum(t.get("summaries_stale", 0) for t in trees.stats.values())
        stale = trees.stale()
        old_leaves = {e.id for e in self.old.pool.entries if e.kind == "leaf"}
        new_leaves = {c.id for c in self.chunks}
        changes.update(leaves_added=len(new_leaves - old_leaves), leaves_removed=len(old_leaves - new_leaves),
                       pool_entries=len(self.retrieval_pool), trees=trees.stats)
        drift = record_change(self.manifest, command=command, plan=self.change, leaves_before=len(old_leaves),
                              leaves_added=changes["leaves_added"], leaves_removed=changes["leaves_removed"],
                              summaries_written=trees.written, chunks_extracted=changes["chunks_extracted"],
                              summaries_stale=changes["summaries_stale"], stale_in_index=len(stale),
                              refresh_threshold=settings.refresh_threshold)
        self.manifest.corpus = replace(self.manifest.corpus or Corpus(), documents=len(self.documents))
        self.write_manifest(self.manifest, components=self.components, counts=self.counts, staleness=stale)
        return drift
