"""Dry run of a build: how many LLM calls and tokens each stage would spend, calling no model.

The dry run walks the build's plan (:class:`~sirerag.pipeline.plan.BuildPlan`) with a counting
runner (:class:`CountingRunner`): the stages a build with the same settings runs, in the same
order, each counting the requests the build would send instead of sending them.

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

import logging
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.config import BuildConfig
from sirerag.core.io.guard import check_cache_dir
from sirerag.pipeline.dryrun_estimates import (CacheLookup, PlanningSummarizer, StageEstimate, extraction_estimates,
                                               summary_estimates)
from sirerag.pipeline.models import Models
from sirerag.pipeline.plan import BuildPlan, Stage, StageHook
from sirerag.pipeline.timing import StageTime, Throughput, estimate_times, times_to_dict
from sirerag.core.types import Document
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)

__all__ = ["CountingRunner", "DryRunReport", "StageEstimate", "add_times", "dry_run", "format_report"]


@dataclass
class DryRunReport:
    """The plan of a build: LLM spec, corpus counts, one :class:`StageEstimate` per group of LLM requests, and
    the stages of the build plan the dry run walked (``plan``)."""

    llm: str | None
    corpus: dict[str, int]
    stages: list[StageEstimate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    throughput: Throughput | None = None
    times: list[StageTime] = field(default_factory=list)

    def total(self) -> StageEstimate:
        def total(f: str) -> int:
            return sum(getattr(s, f) for s in self.stages)

        return StageEstimate("total", total("calls"), total("input_tokens"), total("output_tokens_max"),
                             total("output_tokens_est"), basis="", cached=total("cached"))

    def to_dict(self) -> dict[str, Any]:
        out = {"llm": self.llm, "corpus": self.corpus, "plan": self.plan, "stages": [asdict(s) for s in self.stages],
               "total": asdict(self.total()), "notes": self.notes}
        if self.throughput is not None:
            out["time"] = times_to_dict(self.times, self.throughput)
        return out


def dry_run(corpus: str | Path | Sequence[Document], config: BuildConfig | None = None, *,
            cache_dir: str | Path | None = None, show_progress: bool = True,
            on_stage: StageHook | None = None, throughput: Throughput | None = None) -> DryRunReport:
    """Plan a build of ``corpus`` with ``config`` and count its LLM calls and tokens.

    Args:
        corpus: a corpus path or loaded documents (as for :func:`~sirerag.pipeline.build.build_index`).
        config: the build settings; ``config.llm.spec`` names the LLM (None: offline build).
        cache_dir: the build's cache folder (``<out>/cache``): embeddings are reused and
            cached LLM calls are counted.
        show_progress: progress bars for embedding and clustering.
        on_stage: called around every stage of the plan, as for :func:`~sirerag.pipeline.build.build_index`.
        throughput: the machine's measured throughput (:func:`sirerag.pipeline.timing.measure`): the report then
            gives each stage's estimated wall time (``times``). None: no time estimate.

    Returns:
        A :class:`DryRunReport`. No LLM is called.
    """
    from sirerag.pipeline.build import check_loadable, check_specs

    config = check_specs((config or BuildConfig()).validate())
    cache = check_cache_dir(cache_dir) if cache_dir is not None else None  # the embeddings are cached there
    check_loadable(config)  # fails where the build would, before its first call
    plan = BuildPlan.from_config(config)
    with CountingRunner(corpus, config, plan, cache,
                        show_progress=show_progress) as runner:
        plan.walk(runner, on_stage=on_stage)
    return add_times(runner.report, throughput) if throughput is not None else runner.report


def add_times(report: DryRunReport, throughput: Throughput) -> DryRunReport:
    """``report`` with each stage's estimated wall time at ``throughput``."""
    report.throughput = throughput
    report.times = estimate_times(report.plan, report.stages, report.corpus, throughput)
    return report


class CountingRunner:
    """The stages of a build, counting the LLM requests each would send (:mod:`the module <sirerag.pipeline.dryrun>`
    says what is exact and what is estimated). Stages that call no LLM do nothing."""

    def __init__(self, corpus: str | Path | Sequence[Document], config: BuildConfig, plan: BuildPlan,
                 cache: Path | None, *, show_progress: bool = False) -> None:
        self.corpus, self.config, self.plan, self.show_progress = corpus, config, plan, show_progress
        self.report = DryRunReport(llm=config.llm.spec, corpus={})
        spec = config.embedder.spec
        if spec.startswith("openai"):  # the dry run calls no paid API
            spec = "minilm"
        self.models = Models(config, cache, show_progress=show_progress, embedder_spec=spec)
        self.lookup = CacheLookup(cache / "llm" if cache else None)
        # the LLMs the build would call: the summariser's when a tree stage summarises, the extractor's
        self.summary_llm = config.llm.spec if "summarizer" in plan.models else None
        self.extraction_llm = (config.extraction.llm or config.llm.spec) if "extraction_llm" in plan.models else None
        self.documents: Sequence[Document] = ()
        self.chunks: list[Any] = []
        self.leaf_embeddings: Any = None
        self.offline: list[Any] | None = None

    def __enter__(self) -> "CountingRunner":
        self.models.__enter__()  # the real clustering may use worker processes, as a build's does
        return self

    def __exit__(self, *exc: Any) -> None:
        self.models.close()

    def embedder(self) -> Embedder:
        if self.models.opened("embedder") is None and self.config.embedder.spec != self.models.embedder_spec:
            self.report.notes.append(f"clusters estimated with the offline MiniLM embedder instead of "
                                     f"{self.config.embedder.spec} (the dry run calls no paid API); embedding "
                                     f"tokens are not counted")
        return self.models.embedder()

    def load(self, stage: Stage) -> None:
        from sirerag.text.chunking import chunk_documents
        from sirerag.corpus.load import load_corpus

        corpus, config = self.corpus, self.config
        self.documents = list(corpus) if not isinstance(corpus, (str, Path)) else \
            load_corpus(corpus, warn_passage_bytes=config.chunking.warn_passage_bytes,
                        follow_outside_links=config.corpus.follow_outside_links)
        self.chunks = chunk_documents(self.documents, config.chunking)
        self.report.plan = list(self.plan.names)
        self.report.corpus = {"documents": len(self.documents), "chunks": len(self.chunks),
                              "chunk_tokens": sum(c.n_tokens for c in self.chunks)}
        if not self.summary_llm and not self.extraction_llm:
            self.report.notes.append("no LLM configured: the build uses the offline algorithms and makes no LLM call"
                                     if not config.llm.spec and not config.extraction.llm else
                                     "no stage of this build calls the LLM (no tree to summarise, no LLM "
                                     "extraction)")

    def query_export(self, stage: Stage) -> None:
        """No LLM call."""

    def embed_leaves(self, stage: Stage) -> None:
        if self.summary_llm and "similarity_tree" in self.plan:  # the real clusters need the real leaves
            self.leaf_embeddings = self.embedder().encode_documents([c.text for c in self.chunks])

    def similarity_tree(self, stage: Stage) -> None:
        from sirerag.trees.similarity import build_similarity_tree

        if not self.summary_llm:
            return
        config = self.config
        planner = PlanningSummarizer(config.tree.summary_max_tokens, config.llm.temperature)
        build_similarity_tree(self.chunks, self.leaf_embeddings, embedder=self.embedder(), summarizer=planner,
                              clustering=config.clustering, tree=config.tree, random_state=config.seed,
                              show_progress=self.show_progress)
        self.report.stages += summary_estimates("similarity", planner, self.lookup.bind(self.summary_llm),
                                                exact_first=True)

    def _offline_propositions(self) -> list[Any]:
        """The offline extractor's propositions: the stand-ins of the LLM's (output estimates, relatedness tree)."""
        if self.offline is None:
            from sirerag.extraction import extract

            offline = extract(self.chunks, self.documents, config=replace(self.config.extraction, extractor="offline"),
                              llm=None, show_progress=self.show_progress)
            self.offline = list(offline.propositions)
        return self.offline

    def extraction(self, stage: Stage) -> None:
        if not self.extraction_llm:
            return
        self.report.stages += extraction_estimates(self.chunks, self.documents, self.config,
                                                   self._offline_propositions(),
                                                   self.lookup.bind(self.extraction_llm))
        if "relatedness_tree" in self.plan:
            self.report.notes.append("the relatedness tree is estimated on offline propositions (sentences with "
                                     "rule-based entities) in place of the LLM's")

    def relatedness_tree(self, stage: Stage) -> None:
        from sirerag.trees.relatedness import build_relatedness_tree

        config = self.config
        if not (self.summary_llm and config.relatedness.summaries):
            return
        planner = PlanningSummarizer(config.tree.summary_max_tokens, config.llm.temperature)
        build_relatedness_tree(self._offline_propositions(), embedder=self.embedder(), summarizer=planner,
                               clustering=config.clustering, tree=config.tree, relatedness=config.relatedness,
                               random_state=config.seed, show_progress=self.show_progress)
        self.report.stages += summary_estimates("relatedness", planner, self.lookup.bind(self.summary_llm),
                                                exact_first=not self.extraction_llm)

    def pool(self, stage: Stage) -> None:
        """No LLM call."""

    def bm25(self, stage: Stage) -> None:
        """No LLM call."""

    def ann(self, stage: Stage) -> None:
        """No LLM call."""

    def graph(self, stage: Stage) -> None:
        """No LLM call (the graph embeds entities and facts; embedding tokens are not counted)."""


def format_report(report: DryRunReport) -> str:
    """A plain-text table of the report (what ``sirerag build --dry-run`` prints)."""
    c = report.corpus
    timed = report.throughput is not None and report.throughput.llm_output_tokens_per_s is not None
    called = "no model called for the build; the LLM endpoint timed with 3 short requests" if timed else \
        "no model called"
    lines = [f"dry run ({called}): {c['documents']} documents, {c['chunks']} chunks "
             f"({c['chunk_tokens']} tokens); LLM {report.llm or 'none'}"]
    head = f"  {'stage':<34} {'calls':>8} {'input tok':>12} {'output max':>12} {'output est':>12} {'cached':>7}"
    lines.append(head)
    for s in report.stages + ([report.total()] if report.stages else []):
        lines.append(f"  {s.stage:<34} {s.calls:>8} {s.input_tokens:>12} {s.output_tokens_max:>12} "
                     f"{s.output_tokens_est:>12} {s.cached:>7}")
    for s in report.stages:
        lines.append(f"    {s.stage}: {s.basis}")
    lines += [f"  note: {n}" for n in report.notes]
    if report.throughput is not None:
        lines += format_times(report.times, report.throughput)
    return "\n".join(lines)


def format_times(times: Sequence[StageTime], throughput: Throughput) -> list[str]:
    """The estimated wall time of each stage, and where the throughput figures come from."""
    lines = ["estimated wall time (clustering not counted; an LLM server answering one request at a time):"]
    for t in times:
        if t.seconds or t.seconds is None:  # the stages with model work
            lines.append(f"  {t.stage:<18} {_duration(t.seconds):>10}  {t.basis}")
    total = sum(t.seconds for t in times if t.seconds is not None)
    partial = any(t.seconds is None for t in times)
    lines.append(f"  {'total':<18} {_duration(total):>10}" + ("  (at least: a stage is not estimated)" if partial
                                                              else ""))
    lines += [f"  throughput: {n}" for n in throughput.notes]
    return lines


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"
