"""Teacher data for distilling the extractor (``finetune make-data``).

A teacher LLM (any backend: an OpenAI-compatible server, a local ``hf:`` model)
runs the build's two extraction prompts over a corpus, through the build's own
code (:func:`sirerag.extraction.rewrite_chunks`, :func:`sirerag.extraction.extract_facts`),
so the student learns exactly the requests it will be sent:

* ``rewrite``: the coreference rewrite (paper Figure 6); kept only when the drift
  guard accepts it (the target is the cleaned rewrite);
* ``extract``: proposition + entity extraction (paper Figure 7) on the accepted
  rewrite (or the original text when the rewrite was refused); kept only when the
  answer parses and validates, with at least one fact left after the build's
  cleaning. The target is the validated facts re-serialised canonically (a code
  block with ``{"f1": {"fact": ..., "entities": [...]}, ...}``), and the prompt is
  always the first-attempt prompt even if the teacher needed a retry.

Everything rejected is written to ``rejected.jsonl`` with the stage, the reason
and the raw output. Examples are split into train/validation *by document*
(seeded), so no document contributes to both. Every teacher call goes through the
call cache, so running again is free.

Output folder: ``train.jsonl`` / ``validation.jsonl`` with their ``.meta.jsonl``
files (see :mod:`sirerag_finetune.data_format`), ``rejected.jsonl``, ``data_card.json`` and
``data_card.md``.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import ChunkingConfig, LLMConfig
from sirerag.core.errors import ConfigError, check
from sirerag.core.io import write_jsonl
from sirerag.llm.prompts import COREF_REWRITE, EXTRACT_PROPOSITIONS
from sirerag.core.types import Document

from sirerag_finetune.data_format import (Example, extraction_example, read_examples, rewrite_example, split_by_document,
                              write_dataset)

logger = logging.getLogger(__name__)

TASKS = ("rewrite", "extract")
__all__ = ["TASKS", "Example", "extraction_example", "make_teacher_data", "read_examples", "rewrite_example",
           "split_by_document", "teacher_examples", "write_dataset"]


def teacher_examples(
    documents: Sequence[Document],
    llm: Any,
    *,
    chunking: ChunkingConfig,
    tasks: Sequence[str] = TASKS,
    rewrite_max_tokens: int = 512,
    extract_max_tokens: int = 1024,
    max_attempts: int = 2,
    show_progress: bool = True,
) -> tuple[list[Example], list[dict[str, Any]], dict[str, int]]:
    """Run the teacher over ``documents``; returns ``(examples, rejected, counts)``.

    ``rejected`` holds one record per refused output (``stage``, ``reason``, ``raw``).
    """
    from sirerag.text.chunking import chunk_documents
    from sirerag.extraction import extract_facts, rewrite_chunks
    from sirerag.extraction.coref import chunk_contexts, rewrite_requests

    chunks = chunk_documents(documents, chunking)
    contexts = chunk_contexts(chunks, documents)
    examples: list[Example] = []
    rejected: list[dict[str, Any]] = []
    counts: Counter[str] = Counter(chunks=len(chunks))
    texts = [c.text for c in chunks]
    if "rewrite" in tasks:
        rewrites = rewrite_chunks(chunks, documents, llm, max_tokens=rewrite_max_tokens, show_progress=show_progress)
        asked = rewrite_requests(chunks, documents, max_tokens=rewrite_max_tokens, contexts=contexts)
        for i, (chunk, context, request, r) in enumerate(zip(chunks, contexts, asked, rewrites)):
            if r.accepted:
                texts[i] = r.text
                examples.append(rewrite_example(context, chunk.text, r.text, doc_id=chunk.doc_id,
                                                chunk_id=chunk.id, max_tokens=request.max_tokens))
            else:
                rejected.append({"stage": "rewrite", "doc_id": chunk.doc_id, "chunk_id": chunk.id,
                                 "reason": r.reason, "raw": r.raw})
    if "extract" in tasks:
        sources = ["\n".join((c.text, t, ctx)) for c, t, ctx in zip(chunks, texts, contexts)]
        outcomes = extract_facts(texts, llm, sources=sources, max_tokens=extract_max_tokens,
                                 max_attempts=max_attempts, show_progress=show_progress)
        for chunk, text, source, o in zip(chunks, texts, sources, outcomes):
            counts["extract_retried"] += o.attempts > 1
            counts["facts_dropped_by_cleaning"] += o.echoed
            counts["entities_dropped_ungrounded"] += o.ungrounded
            reason = o.error or (None if o.facts else "the answer holds no facts")
            if reason is not None:
                rejected.append({"stage": "extract", "doc_id": chunk.doc_id, "chunk_id": chunk.id,
                                 "reason": reason, "raw": list(o.raw)})
                continue
            examples.append(extraction_example(text, o.facts, doc_id=chunk.doc_id, chunk_id=chunk.id,
                                               max_tokens=extract_max_tokens, source=source))
    return examples, rejected, dict(counts)


def _reason_kind(reason: str | None) -> str:
    """Group reasons that differ only in numbers ("keeps only 41% ..." -> "keeps only N% ...")."""
    return re.sub(r"\d+(?:\.\d+)?", "N", reason or "unknown")


def make_teacher_data(
    corpus: str | Path | Sequence[Document],
    out: str | Path,
    *,
    teacher: str,
    llm_config: LLMConfig | None = None,
    cache_dir: str | Path | None = None,
    chunking: ChunkingConfig | None = None,
    tasks: Sequence[str] = TASKS,
    validation_fraction: float = 0.2,
    seed: int = 224,
    limit: int | None = None,
    rewrite_max_tokens: int = 512,
    extract_max_tokens: int = 1024,
    max_attempts: int = 2,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Make teacher data and write it to ``out``; returns the data card.

    Args:
        corpus: a corpus path (as ``sirerag build`` reads) or loaded documents.
        out: output folder (created).
        teacher: LLM spec of the teacher, e.g. ``openai:Meta-Llama-3-70B-Instruct@http://...``.
        llm_config: backend settings (concurrency, batch size, device...).
        cache_dir: call cache folder (default ``<out>/cache``).
        chunking: how documents are chunked (default: one chunk per document).
        tasks: ``rewrite`` and/or ``extract``.
        validation_fraction: share of documents held out for validation, in [0, 1).
        seed: seed of the document split.
        limit: use only the first ``limit`` documents.
        rewrite_max_tokens, extract_max_tokens, max_attempts: as in the build's extraction stage.
        show_progress: progress bars.

    Raises:
        ConfigError: invalid arguments, or no valid example at all.
        InputError: the corpus cannot be read.
    """
    from sirerag.corpus.load import load_corpus
    from sirerag.llm.factory import load_llm

    tasks = tuple(tasks)
    check(bool(tasks) and all(t in TASKS for t in tasks), "tasks", tasks, f"a non-empty subset of {TASKS}")
    check(0.0 <= validation_fraction < 1.0, "validation_fraction", validation_fraction, "a number in [0, 1)")
    check(limit is None or (isinstance(limit, int) and limit > 0), "limit", limit, "a positive integer or None")
    chunking = chunking or ChunkingConfig(mode="passage")
    out = Path(out)
    documents = list(corpus) if not isinstance(corpus, (str, Path)) else load_corpus(corpus)
    documents = documents[:limit] if limit else documents
    llm = load_llm(teacher, config=llm_config or LLMConfig(), cache_dir=cache_dir or out / "cache")
    examples, rejected, counts = teacher_examples(
        documents, llm, chunking=chunking, tasks=tasks, rewrite_max_tokens=rewrite_max_tokens,
        extract_max_tokens=extract_max_tokens, max_attempts=max_attempts, show_progress=show_progress)
    write_jsonl(out / "rejected.jsonl", rejected)
    if not examples:
        raise ConfigError(f"teacher {llm.spec!r} produced no valid example from {len(documents)} document(s) "
                          f"({len(rejected)} outputs rejected; see {out / 'rejected.jsonl'}); use a stronger teacher")
    train, validation = split_by_document(examples, validation_fraction, seed)
    card = write_dataset(out, train, validation, extra={
        "teacher": llm.spec, "corpus": str(corpus) if isinstance(corpus, (str, Path)) else "<in memory>",
        "documents": len(documents), "chunking": asdict(chunking), "tasks": list(tasks),
        "prompt_versions": {"rewrite": COREF_REWRITE.key, "extract": EXTRACT_PROPOSITIONS.key},
        "budgets": {"rewrite_max_tokens": rewrite_max_tokens, "extract_max_tokens": extract_max_tokens,
                    "max_attempts": max_attempts},
        "split": {"by": "document", "seed": seed, "validation_fraction": validation_fraction},
        "teacher_counts": counts,
        "rejected": {"total": len(rejected),
                     "by_stage": dict(Counter(r["stage"] for r in rejected)),
                     "by_reason": dict(Counter(f"{r['stage']}: {_reason_kind(r['reason'])}" for r in rejected)
                                       .most_common())},
    })
    logger.info("teacher data: %d train / %d validation examples, %d rejected outputs -> %s",
                len(train), len(validation), len(rejected), out)
    return card


