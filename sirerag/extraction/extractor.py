"""The extraction stage of a build: chunks in, propositions with entities out.

``extraction.extractor = "offline"`` runs :class:`~sirerag.extraction.offline.OfflineExtractor`;
``"llm"`` runs the coreference rewrite (if ``extraction.rewrite``) and then the JSON
extraction through the LLM. Model output never stops a build: a chunk that fails
is recorded (stage, reason, raw output) in :attr:`ExtractionResult.failures`,
written to ``extraction_failures.jsonl`` in the index, and counted in the stats.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import ExtractionConfig
from sirerag.core.errors import ConfigError
from sirerag.core.io import write_jsonl
from sirerag.llm.base import LLM
from sirerag.core.types import Chunk, Document, Proposition

logger = logging.getLogger(__name__)

FAILURES = "extraction_failures.jsonl"
REWRITES = "rewrites.jsonl"


@dataclass(frozen=True)
class ExtractionResult:
    """What the extraction stage produced.

    Attributes:
        propositions: in document order, chunk order, then order within the chunk; entities
            normalised. Propositions without entities are kept here (the relatedness tree
            drops them; the counts say how many).
        rewrites: chunk id -> rewritten text (LLM mode, accepted rewrites only).
        failures: one record per problem: ``chunk_id``, ``doc_id``, ``stage``
            (``rewrite``/``extract``), ``reason``, ``raw`` (model output(s)) and, for the
            rewrite, ``fallback="original"``.
        stats: counts (chunks, propositions, propositions without entities, entity mentions,
            failures, rewrite fallbacks, ...).
        spec: ``offline:rules``, ``offline:spacy:MODEL`` or ``llm:<llm spec>``.
        rewrite_records: LLM mode with rewrite: per chunk ``chunk_id``, ``doc_id``,
            ``original``, ``rewrite`` (raw model output), ``used`` (``rewrite``/``original``)
            and ``reason`` (why the original was kept); written to ``rewrites.jsonl``.
    """

    propositions: tuple[Proposition, ...]
    rewrites: dict[str, str] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    rewrite_records: list[dict[str, Any]] = field(default_factory=list)


def extract(chunks: Sequence[Chunk], documents: Sequence[Document], *, config: ExtractionConfig,
            llm: LLM | None, out: str | Path | None = None, show_progress: bool = True) -> ExtractionResult:
    """Extract propositions and entities from every chunk.

    Args:
        chunks: the build's chunks, in document order.
        documents: the corpus (titles are hints and context).
        config: ``extraction`` settings.
        llm: required when ``config.extractor == "llm"``; with ``"auto"`` it is used when given; ignored
            with ``"offline"``.
        out: the index directory; failures (and, in LLM mode, rewrites) are written there.
        show_progress: progress bars.

    Raises:
        ConfigError: invalid settings, or ``extractor="llm"`` without an LLM.
        MissingExtraError: ``ner="spacy:..."`` without spaCy installed.
    """
    config.validate()
    if config.extractor == "llm" or (config.extractor == "auto" and llm is not None):
        if llm is None:
            raise ConfigError("extraction.extractor is 'llm' but no LLM is configured; pass --llm SPEC "
                              "(or set extraction.llm) or use extraction.extractor = 'offline'")
        result = _extract_llm(chunks, documents, config, llm, show_progress)
    else:
        result = _extract_offline(chunks, documents, config, show_progress)
    _finish_stats(result, len(chunks))
    if out is not None:
        out = Path(out)
        write_jsonl(out / FAILURES, result.failures)
        if result.rewrite_records:
            write_jsonl(out / REWRITES, result.rewrite_records)
    logger.info("extraction (%s): %d propositions from %d chunks, %d without entities, %d failure(s)",
                result.spec, len(result.propositions), len(chunks), result.stats["without_entities"],
                result.stats["failed_chunks"])
    return result


def _extract_offline(chunks: Sequence[Chunk], documents: Sequence[Document], config: ExtractionConfig,
                     show_progress: bool) -> ExtractionResult:
    from sirerag.extraction.offline import extract_offline, offline_extractor

    extractor = offline_extractor(config.ner, lambda: (c.text for c in chunks))
    propositions = extract_offline(chunks, documents, extractor, show_progress=show_progress)
    stats = {"extractor": extractor.spec, **extractor.stats, "failed_chunks": 0, "rewrite_fallbacks": 0}
    return ExtractionResult(propositions=tuple(propositions), stats=stats, spec=extractor.spec)


def _extract_llm(chunks: Sequence[Chunk], documents: Sequence[Document], config: ExtractionConfig, llm: LLM,
                 show_progress: bool) -> ExtractionResult:
    from sirerag.extraction.coref import chunk_contexts, rewrite_chunks
    from sirerag.extraction.llm import extract_facts

    failures: list[dict[str, Any]] = []
    rewrites: dict[str, str] = {}
    records: list[dict[str, Any]] = []
    if config.rewrite:
        outcomes = rewrite_chunks(chunks, documents, llm, max_tokens=config.rewrite_max_tokens,
                                  min_overlap=config.rewrite_min_overlap, max_growth=config.rewrite_max_growth,
                                  show_progress=show_progress)
        texts = [r.text for r in outcomes]
        for chunk, r in zip(chunks, outcomes):
            records.append({"chunk_id": chunk.id, "doc_id": chunk.doc_id, "original": r.original,
                            "rewrite": r.raw, "used": "rewrite" if r.accepted else "original", "reason": r.reason})
            if r.accepted:
                rewrites[chunk.id] = r.text
            else:
                failures.append({"chunk_id": chunk.id, "doc_id": chunk.doc_id, "stage": "rewrite",
                                 "reason": r.reason, "fallback": "original", "raw": [r.raw] if r.raw else []})
    else:
        texts = [c.text for c in chunks]
    # entities may come from the text, the rewrite or the context
    sources = ["\n".join((chunk.text, text, context))
               for chunk, text, context in zip(chunks, texts, chunk_contexts(chunks, documents))]
    facts = extract_facts(texts, llm, sources=sources, max_tokens=config.extract_max_tokens,
                          max_attempts=config.max_attempts, ground_entities=config.ground_entities,
                          show_progress=show_progress)
    propositions: list[Proposition] = []
    counts = {"retried_chunks": 0, "truncated_outputs": 0, "dropped_facts": 0, "ungrounded_entities": 0,
              "repaired_outputs": 0}
    for chunk, outcome in zip(chunks, facts):
        counts["retried_chunks"] += outcome.attempts > 1
        if outcome.error is not None:
            failures.append({"chunk_id": chunk.id, "doc_id": chunk.doc_id, "stage": "extract",
                             "reason": outcome.error, "attempts": outcome.attempts, "raw": list(outcome.raw)})
            continue
        counts["truncated_outputs"] += outcome.truncated
        counts["dropped_facts"] += outcome.echoed
        counts["ungrounded_entities"] += outcome.ungrounded
        counts["repaired_outputs"] += bool(set(outcome.repairs) - {"code_fence"})
        for index, fact in enumerate(outcome.facts):
            propositions.append(Proposition(id=Proposition.make_id(chunk.id, index, fact.text), text=fact.text,
                                            entities=fact.entities, chunk_id=chunk.id, doc_id=chunk.doc_id,
                                            index=index))
    spec = f"llm:{llm.spec}"
    stats = {"extractor": spec, "rewrite": config.rewrite,
             "rewrite_fallbacks": sum(1 for f in failures if f["stage"] == "rewrite"),
             "failed_chunks": sum(1 for f in failures if f["stage"] == "extract"), **counts}
    return ExtractionResult(propositions=tuple(propositions), rewrites=rewrites, failures=failures, stats=stats,
                            spec=spec, rewrite_records=records)


def _finish_stats(result: ExtractionResult, n_chunks: int) -> None:
    props = result.propositions
    mentions = sum(len(p.entities) for p in props)
    result.stats.update(
        chunks=n_chunks,
        propositions=len(props),
        without_entities=sum(1 for p in props if not p.entities),
        entity_mentions=mentions,
        entities=len({e.casefold() for p in props for e in p.entities}),
        chunks_without_propositions=n_chunks - len({p.chunk_id for p in props}),
        failures=len(result.failures),
    )
