"""``sirerag add`` / ``sirerag remove``: change an index's documents without rebuilding it.

The update runs like a build, as one transaction (:func:`sirerag.io.staging.staged_index`):
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
- BM25 and (when the index has one) the entity graph are rebuilt from the stored records: no
  model calls, the graph's entity and fact embeddings come from the embedding cache. A ColBERT
  index no longer matches the pool and is dropped (``sirerag index`` builds it again).
- The manifest keeps the build's settings and records the change in ``history`` and ``drift``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from sirerag.config import BuildConfig
from sirerag.errors import SireragError
from sirerag.extraction.extractor import FAILURES, REWRITES
from sirerag.io import write_jsonl, write_manifest
from sirerag.io.guard import check_cache_dir
from sirerag.io.staging import staged_index
from sirerag.lexical import save_bm25
from sirerag.pipeline import build as build_mod
from sirerag.pipeline.build import stage_timer
from sirerag.pipeline.endpoints import check_endpoints
from sirerag.pipeline.changes import (DEFAULT_DRIFT_WARN, DEFAULT_REFRESH_THRESHOLD, Plan, UpdateConfig,
                                      merged_records, plan_changes, record_change)
from sirerag.pipeline.update_trees import KnownEmbedder, TreeUpdate
from sirerag.pool import CHUNKS, DOCUMENTS, PROPOSITIONS, flatten, load_index, save_pool, save_records
from sirerag.trees.base import TreeResult
from sirerag.types import Chunk, Document

logger = logging.getLogger(__name__)

_NOT_KEPT = ("format", "format_version", "sirerag_version", "files")


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
                 remove: Iterable[str] = (), cache_dir: str | Path | None = None, summarizer: Any | None = None,
                 drift_warn: float = DEFAULT_DRIFT_WARN, refresh_threshold: float = DEFAULT_REFRESH_THRESHOLD,
                 show_progress: bool = False) -> UpdateReport:
    """Add and/or remove documents of an index in place.

    Args:
        index: the index directory (written by ``sirerag build``).
        add: a corpus path or documents to add (same id and text: skipped; same id, other text: updated).
        remove: document ids to remove.
        cache_dir: the model-call caches (default ``<index>/cache``, as for the build).
        summarizer: replaces the summariser the build's settings name (tests, benchmarks).
        drift_warn: share of leaves changed since the last full build past which a warning is logged.
        refresh_threshold: share of a changed cluster's member tokens up to which it keeps its summary
            text (:class:`~sirerag.pipeline.changes.UpdateConfig`); 0 rewrites every changed cluster.
        show_progress: progress bars.

    Raises:
        ConfigError: ``refresh_threshold`` or ``drift_warn`` is out of range; nothing changes.
        InputError: an id to remove is not in the index, or the corpus is invalid; nothing changes.
        IndexFormatError: the index is not readable.
        IndexLockedError: another process is writing it.
        SireragError: the index uses a relatedness variant the update does not support.
    """
    settings = UpdateConfig(refresh_threshold=refresh_threshold, drift_warn=drift_warn).validate()
    out = Path(index)
    cache = check_cache_dir(cache_dir, index=out) if cache_dir is not None else out / "cache"
    command = "add" if add is not None else "remove"
    start = time.perf_counter()
    inputs = (add,) if isinstance(add, (str, Path)) else ()
    try:
        with staged_index(out, command=command, keep=build_mod._kept_folders(out, cache), inputs=inputs) as stage:
            report = _update(out, stage, add, remove, cache, summarizer, command, settings, show_progress)
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


def _update(out: Path, stage: Path, add: Any, remove: Iterable[str], cache: Path, summarizer: Any,
            command: str, settings: UpdateConfig, show_progress: bool) -> UpdateReport:
    from sirerag.chunking import chunk_documents
    from sirerag.embedding import load_embedder
    from sirerag.io.corpus import load_corpus

    old = load_index(out)
    manifest = dict(old.manifest)
    config = BuildConfig.from_dict(manifest.get("config", {}), source=f"{out}/manifest.json").validate()
    check_endpoints(config)  # before the embedder loads
    if config.relatedness.include_propositions or (not config.relatedness.aggregates and
                                                   "relatedness" in config.trees):
        raise SireragError(f"{out}: add/remove supports the relatedness tree of aggregates (the default and "
                           "ablation A); this index puts propositions in the pool: rebuild it instead")
    timings: dict[str, float] = {}
    with stage_timer(timings, "load"):
        new_docs: Sequence[Document] = () if add is None else list(add) if not isinstance(add, (str, Path)) else \
            load_corpus(add, warn_passage_bytes=config.chunking.warn_passage_bytes)
        plan = plan_changes(old.documents(), add=new_docs, remove=remove)
        counts: dict[str, Any] = {"documents_added": len(plan.added) - len(plan.updated),
                                  "documents_updated": len(plan.updated),
                                  "documents_removed": len(plan.removed) - len(plan.updated),
                                  "documents_skipped": plan.skipped, "summaries_written": 0, "chunks_extracted": 0}
        if plan.empty:
            raise _Unchanged(counts)
        old_chunks = old.chunks()
        new_chunks = chunk_documents(plan.added, config.chunking)
        chunks = [c for c in old_chunks if c.doc_id not in plan.removed] + new_chunks

    load_spec = (manifest.get("embedder") or {}).get("load_spec") or config.embedder.spec
    embedder = load_embedder(load_spec, batch_size=config.embedder.batch_size, cache_dir=cache / "embeddings",
                             show_progress=show_progress)
    opened: list[Any] = [embedder]
    if summarizer is None:
        opened.append(build_mod._load_llm(config, cache))
        summarizer = build_mod.make_summarizer(config, opened[-1], show_progress=show_progress)
    vectors = {e.id: row for e, row in zip(old.pool.entries, old.pool.embeddings)}
    with stage_timer(timings, "embed_leaves"):
        if new_chunks:
            rows = np.asarray(embedder.encode_documents([c.text for c in new_chunks]), dtype=np.float32)
            vectors.update({c.id: row for c, row in zip(new_chunks, rows)})
    trees = TreeUpdate(old.pool.entries, vectors, config, embedder, summarizer,
                       refresh_threshold=settings.refresh_threshold, staleness=manifest.get("staleness"))
    with stage_timer(timings, "similarity_tree"):
        trees.similarity(chunks)

    propositions: list = []
    has_props = PROPOSITIONS in manifest["files"]
    if has_props:
        with stage_timer(timings, "extraction"):
            fresh, failures, rewrites = _extract(chunks, new_chunks, plan, config, cache, opened, show_progress)
            propositions = [p for p in old.propositions() if p.doc_id not in plan.removed] + fresh
        counts["chunks_extracted"] = len(new_chunks)
        save_records(stage, PROPOSITIONS, propositions)
        write_jsonl(stage / FAILURES, merged_records(out / FAILURES, plan.removed, failures))
        if rewrites or REWRITES in manifest["files"]:
            write_jsonl(stage / REWRITES, merged_records(out / REWRITES, plan.removed, rewrites))
    if "relatedness" in config.trees:
        with stage_timer(timings, "relatedness_tree"):
            trees.relatedness(propositions)

    save_records(stage, DOCUMENTS, plan.documents)
    save_records(stage, CHUNKS, chunks)
    pool = flatten([TreeResult(nodes=tuple(nodes), embeddings=np.vstack([vectors[n.id] for n in nodes])
                               if nodes else np.zeros((0, old.pool.embeddings.shape[1]), dtype=np.float32))
                    for nodes in trees.pool_order()])
    save_pool(stage, pool)
    components = dict(manifest.get("components") or {})
    components["pool"] = {"type": "pool", "entries": "entries.jsonl", "embeddings": "embeddings.npy"}
    components["bm25"] = save_bm25(stage, [e.text for e in pool.entries])
    if "colbert" in components:
        components.pop("colbert")
        logger.warning("%s: the ColBERT index no longer matches the pool and was dropped; run sirerag index "
                       "again to rebuild it", out)
    if "graph" in components:
        from sirerag.graph.store import build_and_save_graph

        with stage_timer(timings, "graph"):
            components["graph"] = build_and_save_graph(
                stage, plan.documents, propositions,
                embedder=KnownEmbedder.from_graph(embedder, old.component("graph")), config=config.graph)
    counts["summaries_written"] = trees.written
    counts["summaries_stale"] = sum(t.get("summaries_stale", 0) for t in trees.stats.values())
    stale = trees.stale()
    old_leaves = {e.id for e in old.pool.entries if e.kind == "leaf"}
    new_leaves = {c.id for c in chunks}
    counts.update(leaves_added=len(new_leaves - old_leaves), leaves_removed=len(old_leaves - new_leaves),
                  pool_entries=len(pool), trees=trees.stats)
    drift = record_change(manifest, command=command, plan=plan, leaves_before=len(old_leaves),
                          leaves_added=counts["leaves_added"], leaves_removed=counts["leaves_removed"],
                          summaries_written=trees.written, chunks_extracted=counts["chunks_extracted"],
                          summaries_stale=counts["summaries_stale"], stale_in_index=len(stale),
                          refresh_threshold=settings.refresh_threshold)
    build_counts = dict(manifest.get("counts") or {})
    build_counts.update(documents=len(plan.documents), chunks=len(chunks),
                        pool={"entries": len(pool), "by_tree_kind_level": pool.counts()})
    content = {k: v for k, v in manifest.items() if k not in _NOT_KEPT}
    content.update(corpus={**(manifest.get("corpus") or {}), "documents": len(plan.documents)},
                   components=components, counts=build_counts, staleness=stale)
    write_manifest(stage, **content)
    build_mod._close_caches(opened)
    return UpdateReport(out=out, changed=True, counts=counts, timings=timings, drift=drift)


def _extract(chunks: list[Chunk], new_chunks: list[Chunk], plan: Plan, config: BuildConfig, cache: Path,
             opened: list[Any], show_progress: bool) -> tuple[list, list[dict[str, Any]], list[dict[str, Any]]]:
    """Propositions, failures and rewrite records of the new chunks only."""
    if not new_chunks:
        return [], [], []
    if config.extraction.extractor == "offline" and not config.extraction.ner.startswith("spacy:"):
        from sirerag.extraction.offline import OfflineExtractor, extract_offline

        extractor = OfflineExtractor().fit(c.text for c in chunks)  # the corpus-wide fit of a build
        return extract_offline(new_chunks, plan.added, extractor), [], []
    from sirerag.extraction import extract

    opened.append(build_mod._load_llm(config, cache, extraction=True))
    result = extract(new_chunks, plan.added, config=config.extraction, llm=opened[-1], out=None,
                     show_progress=show_progress)
    return list(result.propositions), list(result.failures), list(result.rewrite_records)
