"""What the public API hands back for a question: answers with the search results they were read from
(:class:`sirerag.results.SearchResult`).

:func:`answer_question` is ``sirerag ask`` and ``Index.ask``: it reads the ranked entries in order up to a
token budget with the QA reader's prompt and request (:func:`sirerag.evaluation.qa.reader_request`, the prompt
of ``sirerag eval --reader``) and returns the answer with the entries it read as numbered sources.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError, check
from sirerag.corpus.load import terminal_text
from sirerag.evaluation.qa import clean_answer, reader_request
from sirerag.evaluation.retrieval import ContextBuilder
from sirerag.results import SearchResult, source_label
from sirerag.retrievers.base import Hit
from sirerag.core.types import Chunk, Document, Pool

if TYPE_CHECKING:
    from sirerag.llm.base import LLM

logger = logging.getLogger(__name__)

#: reading budget of an answer (cl100k tokens of context) and its completion budget
DEFAULT_TOKEN_BUDGET = 1024
DEFAULT_ANSWER_TOKENS = 64
#: the orders in which an answer reads the entries it took
ORDERS = ("rank", "document")


@dataclass(frozen=True)
class Answer:
    """An answer and what it was read from.

    Attributes:
        question: the question asked.
        text: the reader's answer (first line, without an ``Answer:`` prefix).
        sources: the entries the reader got, in the order it read them (rank order, or document order with
            ``order="document"``); the last one taken in rank order may have been cut at the budget.
        llm: the reader's spec.
        context_tokens: tokens of context read.
        cached: the answer came from a call cache.
    """

    question: str
    text: str
    sources: tuple[SearchResult, ...]
    llm: str
    context_tokens: int
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.text, "llm": self.llm,
                "context_tokens": self.context_tokens, "cached": self.cached,
                "sources": [{"n": n, **s.to_dict()} for n, s in enumerate(self.sources, start=1)]}

    def __str__(self) -> str:
        """The answer and its sources for a terminal: without control or bidi characters (a reply's
        ``\\x1b[2J`` never clears the screen); :meth:`to_dict` keeps the text exact."""
        lines = [self.text or "(no answer)", "", "sources:"]
        lines += [f"  [{n}] {source_label(s)}" for n, s in enumerate(self.sources, start=1)]
        return terminal_text("\n".join(lines))


def open_reader(spec: str, config: LLMConfig, *, option: str = "llm", cache_dir: str | Path | None = None) -> LLM:
    """The reader ``spec`` names, once its endpoint answered (the check of ``sirerag build``,
    :mod:`sirerag.llm.probe`): one ``llm.deadline`` covers the check and the reader's call with its
    retries, and no wait of either (``llm.timeout``, backoff, ``Retry-After``) runs past it.

    Raises:
        ConfigError: a bad spec or setting, or an endpoint that does not answer in time (naming ``option``).
    """
    from sirerag.llm.factory import load_llm, parse_spec
    from sirerag.llm.probe import check_endpoint
    from sirerag.pipeline.endpoints import llm_endpoint

    check(isinstance(config, LLMConfig), "llm_config", config, "a sirerag.core.config.LLMConfig")
    config.validate()
    parse_spec(spec, option=option)
    end = time.monotonic() + float(config.deadline)
    endpoint = llm_endpoint(option, spec, config, timeout=min(float(config.timeout), float(config.deadline)))
    if endpoint is not None:
        check_endpoint(endpoint)
    left = end - time.monotonic()
    if left <= 0:
        raise ConfigError(f"{option} {spec}: the endpoint check used the whole llm.deadline of "
                          f"{config.deadline:g}s")
    return load_llm(spec, config=replace(config, deadline=left), cache_dir=cache_dir)


def reading_positions(documents: Sequence[Document], chunks: Sequence[Chunk]) -> dict[str, tuple[int, int]]:
    """Leaf entry id (a chunk's id) -> (its document's place in the corpus, its place in the document): the
    keys of ``order="document"``."""
    place = {d.id: i for i, d in enumerate(documents)}
    return {c.id: (place.get(c.doc_id, len(place)), c.index) for c in chunks}


def document_order(results: Sequence[SearchResult], positions: Mapping[str, tuple[int, int]]) -> list[int]:
    """Indices of ``results`` in document order: leaves grouped by document (in corpus order) and in their place
    within it; then the entries that span passages (summaries, aggregates), in rank order."""
    def key(i: int) -> tuple[int, int, int]:
        where = positions.get(results[i].entry_id) if results[i].kind == "leaf" else None
        return (0, *where) if where is not None else (1, i, 0)

    return sorted(range(len(results)), key=key)


def answer_question(question: str, results: Sequence[SearchResult], llm: LLM, pool: Pool, *,
                    token_budget: int = DEFAULT_TOKEN_BUDGET, max_tokens: int = DEFAULT_ANSWER_TOKENS,
                    order: str = "rank", positions: Mapping[str, tuple[int, int]] | None = None) -> Answer:
    """Take ``results`` in rank order up to ``token_budget`` tokens, read them in ``order`` and ask ``llm``
    the question.

    Args:
        question: the question.
        results: ranked entries of ``pool`` (from a search for the question).
        llm: an object following :class:`~sirerag.llm.base.LLM`.
        pool: the pool the results rank.
        token_budget: cl100k tokens of context at most (the last entry taken is cut at the budget).
        max_tokens: completion budget of the answer.
        order: ``rank`` (best first) or ``document`` (:func:`document_order`: the same entries, read grouped by
            document and in their place within it, as a long narrative is told).
        positions: with ``order="document"``, :func:`reading_positions` of the pool's documents and chunks.

    Raises:
        ConfigError: a budget is not a positive integer, or ``order`` is not one of :data:`ORDERS`.
        LLMCallError: the reader failed (after its retries).
    """
    check(isinstance(token_budget, int) and token_budget >= 1, "token_budget", token_budget, "an integer >= 1")
    check(isinstance(max_tokens, int) and max_tokens >= 1, "max_tokens", max_tokens, "an integer >= 1")
    check(order in ORDERS, "order", order, " or ".join(repr(o) for o in ORDERS))
    builder = ContextBuilder(pool)
    read: list[SearchResult] = []
    used = 0
    for result in results:
        if used >= token_budget:
            break
        read.append(result)
        used = min(token_budget, used + len(builder.tokens(result.entry_id)))
    parts = builder.parts([Hit(r.entry_id, r.score) for r in read], token_budget)
    if order == "document":
        chosen = document_order(read, positions or {})
        read, parts = [read[i] for i in chosen], [parts[i] for i in chosen]
    context = "\n\n".join(parts)
    completion = llm.complete(reader_request(question, context, max_tokens=max_tokens))
    logger.debug("answered %r from %d entries (%d tokens) with %s", question, len(read), used, llm.spec)
    return Answer(question=question, text=clean_answer(completion.text), sources=tuple(read), llm=llm.spec,
                  context_tokens=used, cached=bool(getattr(completion, "cached", False)))
