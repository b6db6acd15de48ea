"""The index build: compose the stages and write the index directory.

corpus -> chunks -> leaf embeddings -> similarity tree -> (extraction ->
relatedness tree) -> pool -> (entity graph) -> index directory.

Every model call goes through the on-disk caches under ``cache_dir`` (by default
``<out>/cache``), so a killed build resumes and pays only for what is missing.
The index files are written into a staging folder beside ``out`` that replaces it in
one swap, under ``out``'s write lock (:func:`sirerag.io.staging.staged_index`); the
default cache stays in ``out`` during the build and moves into the new index at the swap.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Sequence


from sirerag.config import BuildConfig
from sirerag.errors import ConfigError, SireragError
from sirerag.io import write_manifest
from sirerag.io.guard import check_cache_dir, check_index_out, resolve
from sirerag.io.staging import staged_index
from sirerag.pipeline.endpoints import check_endpoints
from sirerag.lexical import save_bm25
from sirerag.pool import CHUNKS, DOCUMENTS, PROPOSITIONS, flatten, save_pool, save_records
from sirerag.trees.base import TreeResult
from sirerag.types import Document, Pool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildReport:
    """What a build did: counts, timings (seconds) and the components it used."""

    out: Path
    counts: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    components: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {"out": str(self.out), "counts": self.counts, "timings": self.timings, "components": self.components}


@contextlib.contextmanager
def stage_timer(timings: dict[str, float], name: str) -> Iterator[None]:
    """Log ``stage NAME ...`` and record the stage's wall seconds in ``timings[name]`` (builds and
    updates; ``scripts/bench_build.py`` cuts its stages at these log lines)."""
    start = time.perf_counter()
    logger.info("stage %s ...", name)
    try:
        yield
    finally:
        timings[name] = round(time.perf_counter() - start, 3)


def make_summarizer(config: BuildConfig, llm: Any | None, *, show_progress: bool = False):  # noqa: ANN201
    """The LLM summariser when an LLM is configured, else the offline extractive one."""
    if llm is not None:
        from sirerag.trees.llm_summarizer import LLMSummarizer

        return LLMSummarizer(llm, max_tokens=config.tree.summary_max_tokens, show_progress=show_progress)
    from sirerag.trees.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer(max_tokens=config.tree.summary_max_tokens)


def build_index(
    corpus: str | Path | Sequence[Document],
    out: str | Path,
    config: BuildConfig | None = None,
    *,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
) -> BuildReport:
    """Build an index directory from a corpus.

    Args:
        corpus: a corpus path (``.jsonl``, ``.json`` or a folder of ``.txt``/``.md``)
            or already-loaded documents.
        out: the index directory to write (created if missing).
        config: build settings; validated before any work starts.
        cache_dir: where LLM and embedding calls are cached (default ``<out>/cache``).
        show_progress: show progress bars on long stages.

    Returns:
        A :class:`BuildReport` with counts and stage timings.

    Raises:
        ConfigError: a setting is invalid (nothing is computed), or ``out`` may not be
            replaced (not a sirerag index, holds other files, ``/``, home, current folder).
        IndexLockedError: another process is writing ``out``.
        InputError: the corpus is invalid (the message names file and line).
    """
    from sirerag.engine import make_engine

    config = check_specs((config or BuildConfig()).validate())
    out = Path(out)
    inputs = (corpus,) if isinstance(corpus, (str, Path)) else ()
    cache = check_cache_dir(cache_dir, index=out) if cache_dir is not None else resolve(out) / "cache"
    keep = _kept_folders(out, cache)
    check_index_out(out, keep=keep, inputs=inputs)  # before the endpoints are probed and models load
    check_endpoints(config)
    engine = make_engine(config.engine)  # a Ray address that does not answer stops here
    try:
        with staged_index(out, keep=keep, inputs=inputs) as stage:
            report = _build(corpus, stage, config, cache, show_progress, engine)
    finally:
        engine.close()
    logger.info("index written to %s (%d pool entries)", out, report.counts["pool"]["entries"])
    return replace(report, out=out)


def _kept_folders(out: Path, cache: Path) -> tuple[str, ...]:
    """``cache`` and, when the cache folder is inside ``out``, its top folder there."""
    try:
        rel = resolve(cache).relative_to(resolve(out))
    except ValueError:
        return ("cache",)
    if not rel.parts:
        raise ConfigError(f"--cache {cache} is the index folder itself; use a folder inside it or elsewhere")
    return tuple(dict.fromkeys(("cache", rel.parts[0])))


def _build(corpus: str | Path | Sequence[Document], out: Path, config: BuildConfig, cache: Path,
           show_progress: bool, engine: Any) -> BuildReport:
    """Run every stage, writing the index files into ``out`` (the staging folder)."""
    from sirerag.chunking import chunk_documents
    from sirerag.embedding import load_embedder
    from sirerag.io.corpus import load_corpus
    from sirerag.trees.similarity import build_similarity_tree, leaves_from_chunks

    report = BuildReport(out=out)

    with stage_timer(report.timings, "load"):
        documents = list(corpus) if not isinstance(corpus, (str, Path)) else \
            load_corpus(corpus, warn_passage_bytes=config.chunking.warn_passage_bytes)
        chunks = chunk_documents(documents, config.chunking)
    save_records(out, DOCUMENTS, documents)
    save_records(out, CHUNKS, chunks)
    report.counts.update(documents=len(documents), chunks=len(chunks))

    embedder = load_embedder(config.embedder.spec, batch_size=config.embedder.batch_size,
                             cache_dir=cache / "embeddings", show_progress=show_progress, engine=engine)
    llm = _load_llm(config, cache, engine)
    opened = [embedder, llm]
    summarizer = make_summarizer(config, llm, show_progress=show_progress)
    report.components.update(embedder={"spec": embedder.spec, "load_spec": config.embedder.spec,
                                       "dim": embedder.dim},
                             summarizer=summarizer.spec, llm=llm.spec if llm is not None else None)
    if config.embedder.spec == "minilm":
        with stage_timer(report.timings, "query_export"):
            export = _query_export()
        if export is not None:  # what the index needs to know; whether this run wrote it is in the log only,
            # so the same input gives the same manifest (its time is in ``timings``)
            report.components["embedder"]["query_export"] = {k: export[k] for k in ("backend", "key")}

    with stage_timer(report.timings, "embed_leaves"):
        leaf_embeddings = embedder.encode_documents([c.text for c in chunks])
    trees: list[TreeResult] = []
    if "similarity" in config.trees:
        with stage_timer(report.timings, "similarity_tree"):
            tree = build_similarity_tree(
                chunks, leaf_embeddings, embedder=embedder, summarizer=summarizer,
                clustering=config.clustering, tree=config.tree, random_state=config.seed,
                show_progress=show_progress,
            )
        trees.append(tree)
        report.counts["similarity_tree"] = tree.stats.to_dict()
    else:
        trees.append(leaves_from_chunks(chunks, leaf_embeddings))

    propositions: list = []
    if "relatedness" in config.trees or config.graph.enabled:
        from sirerag.extraction import extract

        with stage_timer(report.timings, "extraction"):
            opened.append(_load_llm(config, cache, engine, extraction=True))
            extraction = extract(chunks, documents, config=config.extraction, llm=opened[-1], out=out,
                                 show_progress=show_progress)
        propositions = list(extraction.propositions)
        save_records(out, PROPOSITIONS, propositions)
        report.counts["extraction"] = extraction.stats
        report.components["extractor"] = extraction.spec
    if "relatedness" in config.trees:
        from sirerag.trees.relatedness import build_relatedness_tree

        with stage_timer(report.timings, "relatedness_tree"):
            rtree = build_relatedness_tree(
                propositions, embedder=embedder, summarizer=summarizer, clustering=config.clustering,
                tree=config.tree, relatedness=config.relatedness, random_state=config.seed,
                show_progress=show_progress,
            )
        trees.append(rtree)
        report.counts["relatedness_tree"] = rtree.stats.to_dict()

    pool: Pool = flatten(trees)
    save_pool(out, pool)
    report.counts["pool"] = _pool_counts(pool)
    components: dict[str, Any] = {"pool": {"type": "pool", "entries": "entries.jsonl",
                                           "embeddings": "embeddings.npy"}}
    with stage_timer(report.timings, "bm25"):  # the lexical index, stored so a search only loads it
        components["bm25"] = save_bm25(out, [e.text for e in pool.entries])
    if config.graph.enabled:
        from sirerag.graph.store import build_and_save_graph

        with stage_timer(report.timings, "graph"):
            components["graph"] = build_and_save_graph(out, documents, propositions, embedder=embedder,
                                                       config=config.graph)
    write_manifest(out, config=config.to_dict(), corpus={"documents": len(documents)},
                   components=components, **report.components, counts=report.counts,
                   timings=report.timings)
    _close_caches(opened)  # the default cache folder moves into the new index next
    return report


def check_specs(config: BuildConfig) -> BuildConfig:
    """Check the form of the embedder and LLM specs without loading anything, so a typo
    stops the build before any work; returns ``config``. Raises ``ConfigError``."""
    from sirerag.embedding import parse_embedder_spec
    from sirerag.llm.factory import parse_spec

    parse_embedder_spec(config.embedder.spec)
    for spec in {config.llm.spec, config.extraction.llm} - {None}:
        parse_spec(spec)
    return config


def _query_export() -> dict[str, Any] | None:
    """Export MiniLM to ONNX for fast dense searches, once per machine (torch is loaded already);
    best effort: a build never fails for it. None when the packages for it are missing."""
    from sirerag.embedding.onnx_export import ensure_minilm_query_export, export_available

    if not export_available():
        logger.info("no ONNX export of MiniLM for fast dense searches: onnx, onnxruntime or tokenizers is not "
                    "installed (pip install 'sirerag[local]')")
        return None
    try:
        return ensure_minilm_query_export()
    except (SireragError, RuntimeError, OSError, ValueError) as exc:  # torch's exporter raises RuntimeErrors
        logger.warning("the ONNX export of MiniLM for fast dense searches failed; searches load torch: %s", exc)
        return None


def _close_caches(models: Sequence[Any]) -> None:
    for model in models:
        close = getattr(getattr(model, "cache", None), "close", None)
        if close is not None:
            close()


def _load_llm(config: BuildConfig, cache: Path, engine: Any = None, *, extraction: bool = False):  # noqa: ANN202
    spec = (config.extraction.llm or config.llm.spec) if extraction else config.llm.spec
    if extraction and config.extraction.extractor != "llm":
        return None
    if not spec:
        return None
    from sirerag.llm.factory import load_llm

    return load_llm(spec, config=config.llm, cache_dir=cache / "llm", engine=engine,
                    engine_batch_size=config.engine.llm_batch_size)


def _pool_counts(pool: Pool) -> dict[str, Any]:
    return {"entries": len(pool), "by_tree_kind_level": pool.counts()}
