"""Coreference rewrite of chunks through the LLM (paper Figure 6), with a drift guard.

Each chunk is rewritten with the previous chunk of its document as context (the
first chunk gets the document title instead), so that the propositions
extracted from it name their entities. A small model can drift: answer with the
prompt's example, repeat the paragraph twice, stop half way or invent text. The
guard compares the rewrite with the original and falls back to the original,
recording why, when

* the rewrite is empty, or was cut off by the token limit;
* it has fewer than ``min_overlap`` of the original's words (it dropped or replaced
  content);
* more than ``1 - min_overlap`` of its words occur neither in the original nor in the
  context (it invented content);
* it is more than ``max_growth`` times as long as the original (in words).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Sequence

from sirerag.llm.progress import run_requests
from sirerag.llm.base import LLM, Completion, LLMCallError, LLMRequest
from sirerag.llm.prompts import COREF_REWRITE
from sirerag.core.types import Chunk, Document, collapse_ws

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+", re.UNICODE)
_PREFIX = re.compile(r"^\s*(?:(?:rewritten\s+)?(?:output|paragraph|answer)\s*:\s*)+", re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\n?|\n?```\s*$")


@dataclass(frozen=True)
class Rewrite:
    """The outcome for one chunk: ``text`` is what extraction reads (the rewrite, or the
    original when ``reason`` says why the rewrite was refused); ``raw`` is the model output."""

    chunk_id: str
    original: str
    text: str
    raw: str | None
    reason: str | None = None

    @property
    def accepted(self) -> bool:
        return self.reason is None


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def clean_rewrite(raw: str) -> str:
    """Strip what models put around a rewrite: code fences, an ``Output:`` label, quotes."""
    text = _FENCE.sub("", raw.strip()).strip()
    text = _PREFIX.sub("", text).strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return collapse_ws(text)


def drift_reason(original: str, rewrite: str, context: str = "", *, min_overlap: float = 0.6,
                 max_growth: float = 2.0) -> str | None:
    """Why ``rewrite`` may not replace ``original`` (None when it may); see the module docstring."""
    if not rewrite.strip():
        return "empty rewrite"
    source, out = _words(original), _words(rewrite)
    if not source:
        return None
    out_set, allowed = set(out), set(source) | set(_words(context))
    kept = sum(1 for w in source if w in out_set) / len(source)
    if kept < min_overlap:
        return f"rewrite keeps only {kept:.0%} of the original words (minimum {min_overlap:.0%})"
    novel = sum(1 for w in out if w not in allowed) / max(len(out), 1)
    if novel > 1 - min_overlap:
        return f"{novel:.0%} of the rewrite's words are in neither the original nor its context"
    growth = len(out) / len(source)
    if growth > max_growth:
        return f"rewrite is {growth:.1f} times as long as the original (maximum {max_growth:g})"
    return None


def context_for(chunk: Chunk, previous: Chunk | None, document: Document | None) -> str:
    """The "previous paragraph" given to the model: the previous chunk of the document, or
    for a first chunk a line naming the document."""
    if previous is not None:
        return previous.text
    title = document.title if document is not None else ""
    return f"(This is the first paragraph of the document \"{title}\".)" if title else \
        "(This is the first paragraph of the document.)"


def chunk_contexts(chunks: Sequence[Chunk], documents: Sequence[Document]) -> list[str]:
    """The context of every chunk (:func:`context_for` its previous *original* chunk)."""
    titles = {d.id: d for d in documents}
    previous: dict[str, Chunk] = {}
    contexts = []
    for chunk in chunks:
        contexts.append(context_for(chunk, previous.get(chunk.doc_id), titles.get(chunk.doc_id)))
        previous[chunk.doc_id] = chunk
    return contexts


def rewrite_budget(n_tokens: int, max_tokens: int) -> int:
    """Completion budget of one rewrite: ``2 * n_tokens + 64``, at least 32, at most ``max_tokens``."""
    return max(32, min(max_tokens, 2 * n_tokens + 64))


def rewrite_requests(chunks: Sequence[Chunk], documents: Sequence[Document], *, max_tokens: int = 512,
                     contexts: Sequence[str] | None = None) -> list[LLMRequest]:
    """The coreference-rewrite request of every chunk, exactly as the extraction stage sends
    it (the dry run and the fine-tuning data use this too)."""
    contexts = chunk_contexts(chunks, documents) if contexts is None else contexts
    return [COREF_REWRITE.request(max_tokens=rewrite_budget(chunk.n_tokens, max_tokens), previous=context,
                                  paragraph=chunk.text) for chunk, context in zip(chunks, contexts)]


def rewrite_chunks(chunks: Sequence[Chunk], documents: Sequence[Document], llm: LLM, *,
                   max_tokens: int = 512, min_overlap: float = 0.6, max_growth: float = 2.0,
                   show_progress: bool = True) -> list[Rewrite]:
    """Rewrite every chunk (all requests at once; the context is the previous *original* chunk).

    Args:
        chunks: in document order, chunk order within a document.
        documents: the corpus (for titles).
        llm: any backend of the LLM protocol.
        max_tokens: cap of the completion budget (see :func:`rewrite_budget`).
        min_overlap, max_growth: drift-guard thresholds.
        show_progress: progress bar.

    Returns:
        One :class:`Rewrite` per chunk, in order. Never raises on model output.
    """
    contexts = chunk_contexts(chunks, documents)
    requests = rewrite_requests(chunks, documents, max_tokens=max_tokens, contexts=contexts)
    results = run_requests(llm, requests, desc="coreference rewrite", show_progress=show_progress)
    out: list[Rewrite] = []
    for chunk, context, result in zip(chunks, contexts, results):
        out.append(_judge(chunk, context, result, min_overlap=min_overlap, max_growth=max_growth))
    refused = sum(1 for r in out if not r.accepted)
    if refused:
        logger.info("coreference rewrite: kept the original text of %d of %d chunks", refused, len(out))
    return out


def _judge(chunk: Chunk, context: str, result: Completion | LLMCallError, *, min_overlap: float,
           max_growth: float) -> Rewrite:
    if isinstance(result, LLMCallError):
        return Rewrite(chunk.id, chunk.text, chunk.text, None, f"llm call failed: {result}")
    text = clean_rewrite(result.text)
    if result.finish_reason == "length":
        return Rewrite(chunk.id, chunk.text, chunk.text, result.text, "rewrite cut off at the token limit")
    reason = drift_reason(chunk.text, text, context, min_overlap=min_overlap, max_growth=max_growth)
    if reason:
        return Rewrite(chunk.id, chunk.text, chunk.text, result.text, reason)
    return Rewrite(chunk.id, chunk.text, text, result.text)
