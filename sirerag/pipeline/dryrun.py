"""Dry run of a build: how many LLM calls and tokens each stage would spend, calling no model.

The corpus is loaded and chunked exactly as in a build, and the same requests are
rendered from the same templates, so counts are exact where the inputs are known
and estimated where they depend on earlier model output:

* **summaries** (both trees): the real clustering runs on real embeddings (a local
  embedder; a paid ``openai:`` embedder is replaced by the offline MiniLM for the
  estimate). Level 1 is exact for the similarity tree. Higher levels cluster
  stand-in summaries written by the offline extractive summariser at the same token
  budget, so their counts are estimates.
* **coreference rewrite**: one call per chunk with the previous chunk (or the
  document title) as context: exact inputs.
* **proposition extraction**: one call per chunk. Inputs are exact without the
  rewrite; with it the original chunk stands in for its rewrite. Retries of
  unparseable answers (at most ``extraction.max_attempts - 1`` per chunk) are not counted.
* the **relatedness tree** is estimated on propositions from the offline extractor
  (sentences + rule-based entities) in place of the LLM's.

Output tokens are given as the bound (the sum of ``max_tokens``) and as an estimate
whose basis each stage states. Tokens are tiktoken counts (``cl100k_base``) with
OpenAI's chat framing. With a call cache, ``cached`` counts the exactly known
requests that are already stored (what a resumed build would not pay for).
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from sirerag.config import BuildConfig
from sirerag.llm.accounting import request_tokens
from sirerag.llm.base import LLMRequest
from sirerag.tokens import count_tokens
from sirerag.trees.llm_summarizer import summary_request
from sirerag.types import Document

logger = logging.getLogger(__name__)

#: A rewrite resolves references with names, so it runs a little longer than its input.
REWRITE_OUTPUT_RATIO = 1.1


@dataclass(frozen=True)
class StageEstimate:
    """Calls and tokens of one stage; ``basis`` says what is exact and what is estimated."""

    stage: str
    calls: int
    input_tokens: int
    output_tokens_max: int
    output_tokens_est: int
    basis: str
    cached: int = 0


@dataclass
class DryRunReport:
    """The plan of a build: LLM spec, corpus counts, one :class:`StageEstimate` per stage."""

    llm: str | None
    corpus: dict[str, int]
    stages: list[StageEstimate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def total(self) -> StageEstimate:
        return StageEstimate("total", *(sum(getattr(s, f) for s in self.stages) for f in
                                        ("calls", "input_tokens", "output_tokens_max", "output_tokens_est")),
                             basis="", cached=sum(s.cached for s in self.stages))

    def to_dict(self) -> dict[str, Any]:
        return {"llm": self.llm, "corpus": self.corpus, "stages": [asdict(s) for s in self.stages],
                "total": asdict(self.total()), "notes": self.notes}


class _PlanningSummarizer:
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


def dry_run(corpus: str | Path | Sequence[Document], config: BuildConfig | None = None, *,
            cache_dir: str | Path | None = None, show_progress: bool = True) -> DryRunReport:
    """Plan a build of ``corpus`` with ``config`` and count its LLM calls and tokens.

    Args:
        corpus: a corpus path or loaded documents (as for :func:`~sirerag.pipeline.build.build_index`).
        config: the build settings; ``config.llm.spec`` names the LLM (None: offline build).
        cache_dir: the build's cache folder (``<out>/cache``): embeddings are reused and
            cached LLM calls are counted.
        show_progress: progress bars for embedding and clustering.

    Returns:
        A :class:`DryRunReport`. No LLM is called.
    """
    from sirerag.chunking import chunk_documents
    from sirerag.io.corpus import load_corpus
    from sirerag.pipeline.build import check_loadable, check_specs
    from sirerag.trees.similarity import build_similarity_tree

    config = check_specs((config or BuildConfig()).validate())
    check_loadable(config)  # fails where the build would, before its first call
    documents = list(corpus) if not isinstance(corpus, (str, Path)) else \
        load_corpus(corpus, warn_passage_bytes=config.chunking.warn_passage_bytes)
    chunks = chunk_documents(documents, config.chunking)
    report = DryRunReport(llm=config.llm.spec, corpus={"documents": len(documents), "chunks": len(chunks),
                                                       "chunk_tokens": sum(c.n_tokens for c in chunks)})
    extraction_spec = config.extraction.llm or config.llm.spec
    llm_extraction = config.extraction.extractor == "llm" and "relatedness" in config.trees
    if not config.llm.spec and not (llm_extraction and extraction_spec):
        report.notes.append("no LLM configured: the build uses the offline algorithms and makes no LLM call")
        return report
    cache = Path(cache_dir) if cache_dir is not None else None
    lookup = _CacheLookup(cache / "llm" if cache else None)
    summary_llm = config.llm.spec
    needs_embeddings = bool(summary_llm) and ("similarity" in config.trees or (
        "relatedness" in config.trees and config.relatedness.summaries))
    embedder = _embedder(config, cache, report, show_progress) if needs_embeddings else None
    if "similarity" in config.trees and summary_llm:
        planner = _PlanningSummarizer(config.tree.summary_max_tokens, config.llm.temperature)
        build_similarity_tree(chunks, embedder.encode_documents([c.text for c in chunks]), embedder=embedder,
                              summarizer=planner, clustering=config.clustering, tree=config.tree,
                              random_state=config.seed, show_progress=show_progress)
        report.stages += _summary_stages("similarity", planner, lookup.bind(summary_llm), exact_first=True)
    if "relatedness" not in config.trees:
        return report
    from sirerag.extraction import extract

    offline = extract(chunks, documents, config=replace(config.extraction, extractor="offline"), llm=None,
                      show_progress=show_progress)
    if llm_extraction:
        report.stages += _extraction_stages(chunks, documents, config, offline.propositions,
                                            lookup.bind(extraction_spec))
        report.notes.append("the relatedness tree is estimated on offline propositions (sentences with "
                            "rule-based entities) in place of the LLM's")
    if summary_llm and config.relatedness.summaries:
        from sirerag.trees.relatedness import build_relatedness_tree

        planner = _PlanningSummarizer(config.tree.summary_max_tokens, config.llm.temperature)
        build_relatedness_tree(list(offline.propositions), embedder=embedder, summarizer=planner,
                               clustering=config.clustering, tree=config.tree, relatedness=config.relatedness,
                               random_state=config.seed, show_progress=show_progress)
        report.stages += _summary_stages("relatedness", planner, lookup.bind(summary_llm),
                                         exact_first=not llm_extraction)
    return report


def _embedder(config: BuildConfig, cache: Path | None, report: DryRunReport, show_progress: bool) -> Any:
    """The build's embedder, or the offline MiniLM in place of a paid API."""
    from sirerag.embedding import load_embedder

    spec = config.embedder.spec
    if spec.startswith("openai"):
        report.notes.append(f"clusters estimated with the offline MiniLM embedder instead of {spec} "
                            f"(the dry run calls no paid API); embedding tokens are not counted")
        spec = "minilm"
    return load_embedder(spec, batch_size=config.embedder.batch_size,
                         cache_dir=cache / "embeddings" if cache else None, show_progress=show_progress)


def _summary_stages(tree: str, planner: _PlanningSummarizer, lookup: "_CacheLookup",
                    *, exact_first: bool) -> list[StageEstimate]:
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
                                 lookup.count(requests) if exact else 0))
    return out


def _extraction_stages(chunks: Sequence[Any], documents: Sequence[Document], config: BuildConfig,
                       offline_props: Sequence[Any], lookup: "_CacheLookup") -> list[StageEstimate]:
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
                                 lookup.count(requests)))
    requests = [extraction_request(c.text, max_tokens=ext.extract_max_tokens) for c in chunks]
    by_chunk: dict[str, list[Any]] = {}
    for p in offline_props:
        by_chunk.setdefault(p.chunk_id, []).append(p)
    est = sum(min(ext.extract_max_tokens, _json_tokens(by_chunk.get(c.id, []))) for c in chunks)
    basis = "exact inputs" if not ext.rewrite else "inputs estimated with the original chunk for its rewrite"
    out.append(StageEstimate("proposition extraction", len(requests), sum(request_tokens(r) for r in requests),
                             len(requests) * ext.extract_max_tokens, est,
                             basis + "; output estimated as the offline propositions in the Figure 7 JSON "
                             "format; retries not counted", lookup.count(requests) if not ext.rewrite else 0))
    return out


def _json_tokens(propositions: Sequence[Any]) -> int:
    facts = {f"f{i}": {"fact": p.text, "entities": list(p.entities)} for i, p in enumerate(propositions, 1)}
    return count_tokens("```json\n" + json.dumps(facts, indent=2, ensure_ascii=False) + "\n```")


class _CacheLookup:
    """Counts requests already in the build's LLM call cache (for one LLM spec)."""

    def __init__(self, folder: Path | None, spec: str | None = None) -> None:
        self.folder, self.spec = folder, spec

    def bind(self, spec: str | None) -> "_CacheLookup":
        return _CacheLookup(self.folder, spec)

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


def format_report(report: DryRunReport) -> str:
    """A plain-text table of the report (what ``sirerag build --dry-run`` prints)."""
    c = report.corpus
    lines = [f"dry run (no model called): {c['documents']} documents, {c['chunks']} chunks "
             f"({c['chunk_tokens']} tokens); LLM {report.llm or 'none'}"]
    head = f"  {'stage':<34} {'calls':>8} {'input tok':>12} {'output max':>12} {'output est':>12} {'cached':>7}"
    lines.append(head)
    for s in report.stages + ([report.total()] if report.stages else []):
        lines.append(f"  {s.stage:<34} {s.calls:>8} {s.input_tokens:>12} {s.output_tokens_max:>12} "
                     f"{s.output_tokens_est:>12} {s.cached:>7}")
    for s in report.stages:
        lines.append(f"    {s.stage}: {s.basis}")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)
