"""What the dry run counts: the requests each LLM stage would send, their tokens and the cache.

:class:`PlanningSummarizer` stands in for the summariser while the real clustering runs;
:func:`summary_estimates` and :func:`extraction_estimates` turn the rendered requests into
:class:`StageEstimate` rows; :class:`CacheLookup` counts those already in the build's call cache.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import BuildConfig
from sirerag.llm.accounting import request_tokens
from sirerag.llm.base import LLMRequest
from sirerag.text.tokens import count_tokens
from sirerag.trees.llm_summarizer import summary_request
from sirerag.core.types import Chunk, Document, Proposition

#: A rewrite resolves references with names, so it runs a little longer than its input.
REWRITE_OUTPUT_RATIO = 1.1


@dataclass(frozen=True)
class StageEstimate:
    """Calls and tokens of one group of LLM requests; ``basis`` says what is exact and what is estimated,
    ``plan_stage`` the stage of the build plan that sends them."""

    stage: str
    calls: int
    input_tokens: int
    output_tokens_max: int
    output_tokens_est: int
    basis: str
    cached: int = 0
    plan_stage: str = ""


class PlanningSummarizer:
    """Renders the summary request of every group (what the LLM would be sent) and returns
    the offline extractive summaries as stand-ins so that clustering can go on."""

    def __init__(self, max_tokens: int, temperature: float) -> None:
        from sirerag.trees.extractive import ExtractiveSummarizer

        self.stand_in = ExtractiveSummarizer(max_tokens=max_tokens)
        self.max_tokens, self.temperature = max_tokens, temperature
        self.levels: list[list[LLMRequest]] = []

    @property
    def spec(self) -> str:
        return "dry-run:" + self.stand_in.spec

    def summarize(self, groups: Sequence[Sequence[str]]) -> list[str]:
        self.levels.append([summary_request(g, self.max_tokens, self.temperature)
                            for g in groups if any(t.strip() for t in g)])
        return self.stand_in.summarize(groups)


def summary_estimates(tree: str, planner: PlanningSummarizer, lookup: "CacheLookup",
                      *, exact_first: bool) -> list[StageEstimate]:
    """One row per summary level the planner saw, of the tree ``tree``."""
    out = []
    for level, requests in enumerate(planner.levels, start=1):
        exact = exact_first and level == 1
        bound = sum(r.max_tokens for r in requests)
        if exact:
            basis = "exact inputs (real clusters of the real texts)"
        elif level == 1 and tree == "relatedness":
            basis = "estimated: clusters of aggregates of the offline propositions"
        else:
            basis = "estimated: clusters of offline stand-in summaries of the same token budget"
        out.append(StageEstimate(f"{tree} summaries, level {level}", len(requests),
                                 sum(request_tokens(r) for r in requests), bound, bound,
                                 basis + "; output = the max_tokens bound",
                                 lookup.count(requests) if exact else 0, plan_stage=f"{tree}_tree"))
    return out


def extraction_estimates(chunks: Sequence[Chunk], documents: Sequence[Document], config: BuildConfig,
                         offline_props: Sequence[Proposition], lookup: "CacheLookup") -> list[StageEstimate]:
    """The coreference rewrite (when on) and proposition extraction rows: one call per chunk each."""
    from sirerag.extraction.llm import extraction_request

    out = []
    ext = config.extraction
    if ext.rewrite:
        from sirerag.extraction.coref import rewrite_requests

        requests = rewrite_requests(chunks, documents, max_tokens=ext.rewrite_max_tokens)
        est = sum(min(r.max_tokens, round(c.n_tokens * REWRITE_OUTPUT_RATIO)) for r, c in zip(requests, chunks))
        out.append(StageEstimate("coreference rewrite", len(requests), sum(request_tokens(r) for r in requests),
                                 sum(r.max_tokens for r in requests), est,
                                 f"exact inputs; output estimated as {REWRITE_OUTPUT_RATIO} x chunk tokens",
                                 lookup.count(requests), plan_stage="extraction"))
    requests = [extraction_request(c.text, max_tokens=ext.extract_max_tokens) for c in chunks]
    by_chunk: dict[str, list[Proposition]] = {}
    for p in offline_props:
        by_chunk.setdefault(p.chunk_id, []).append(p)
    est = sum(min(ext.extract_max_tokens, _json_tokens(by_chunk.get(c.id, []))) for c in chunks)
    basis = "exact inputs" if not ext.rewrite else "inputs estimated with the original chunk for its rewrite"
    out.append(StageEstimate("proposition extraction", len(requests), sum(request_tokens(r) for r in requests),
                             len(requests) * ext.extract_max_tokens, est,
                             basis + "; output estimated as the offline propositions in the Figure 7 JSON "
                             "format; retries not counted", lookup.count(requests) if not ext.rewrite else 0,
                             plan_stage="extraction"))
    return out


def _json_tokens(propositions: Sequence[Proposition]) -> int:
    facts = {f"f{i}": {"fact": p.text, "entities": list(p.entities)} for i, p in enumerate(propositions, 1)}
    return count_tokens("```json\n" + json.dumps(facts, indent=2, ensure_ascii=False) + "\n```")


class CacheLookup:
    """Counts requests already in the build's LLM call cache (for one LLM spec)."""

    def __init__(self, folder: Path | None, spec: str | None = None) -> None:
        self.folder, self.spec = folder, spec

    def bind(self, spec: str | None) -> "CacheLookup":
        return CacheLookup(self.folder, spec)

    def count(self, requests: Sequence[LLMRequest]) -> int:
        from sirerag.llm.cache import CallCache, cache_key, resolve_db
        from sirerag.llm.factory import describe_spec

        if self.folder is None or not self.spec or not resolve_db(self.folder).is_file():
            return 0
        backend, model = describe_spec(self.spec)
        cache = CallCache(self.folder)
        try:
            return sum(cache.get(cache_key(backend, model, r)) is not None for r in requests)
        finally:
            cache.close()
