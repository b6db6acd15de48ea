"""Per-stage configuration sections; each validates itself when a build starts."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.dense import DenseConfig
from sirerag.core.config.engine import EngineConfig
from sirerag.core.config.llm import LLMConfig
from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check

TREE_CHOICES = ("similarity", "relatedness")
#: How an aggregate's vector is made (:class:`RelatednessConfig`).
AGGREGATE_VECTORS = ("mean", "token_mean", "text", "window")
#: What embeds the entity graph's names (:class:`GraphConfig`).
NAME_VECTORS = ("auto", "index", "static", "int8")
#: What the embedder computes in (:class:`EmbedderConfig`); the CLI's ``--precision`` offers these.
EMBEDDER_PRECISIONS = ("auto", "float32", "bfloat16", "int8")


@dataclass(frozen=True)
class ChunkingConfig:
    """``tokens``: RAPTOR-style chunks of at most ``max_tokens`` tokens on sentence
    boundaries; ``passage``: one chunk per input document (SiReRAG on the benchmarks).
    A document whose text is longer than ``warn_passage_bytes`` (UTF-8) gets a warning
    naming its file and line when the corpus is read."""

    mode: str = "tokens"
    max_tokens: int = 100
    encoding: str = "cl100k_base"
    warn_passage_bytes: int = 1_000_000

    def validate(self) -> None:
        check_types(self, "chunking")
        check(self.mode in ("tokens", "passage"), "chunking.mode", self.mode, "one of 'tokens', 'passage'")
        check(self.max_tokens >= 8, "chunking.max_tokens", self.max_tokens, "an integer >= 8")
        check(self.warn_passage_bytes >= 1, "chunking.warn_passage_bytes", self.warn_passage_bytes,
              "a positive number of bytes")


@dataclass(frozen=True)
class CorpusConfig:
    """How a folder corpus is read. ``follow_outside_links``: also read the files (and folders) a
    symbolic link inside the folder leads to when their real path lies outside the folder; off, they
    are skipped and counted in one warning. Hidden entries (names starting with ``.``) are always
    skipped."""

    follow_outside_links: bool = False

    def validate(self) -> None:
        check_types(self, "corpus")


@dataclass(frozen=True)
class EmbedderConfig:
    """``spec``: ``minilm`` (the offline default), ``st:PATH_OR_NAME`` or ``openai:MODEL``.
    ``short_texts``: ``auto`` embeds the build's short texts (propositions, entity names) of a
    ``minilm`` index with the same weights on ONNX Runtime when its export exists (the same
    vectors, faster) unless the embedder computes in bfloat16, which is faster still; ``same`` embeds
    them with ``spec`` like everything else.
    ``precision``: what a torch embedder (``minilm``, ``st:``) computes in: ``auto`` (bfloat16 where the
    CPU has bfloat16 instructions, else float32), ``float32`` or ``bfloat16`` (torch backends only); ``int8``
    (``minilm`` only): every text of the build and every query of a search is embedded on ONNX Runtime by
    MiniLM's ONNX export with its weights quantised to int8, made once per machine (extra ``local``)."""

    spec: str = "minilm"
    batch_size: int = 64
    short_texts: str = "auto"
    precision: str = "auto"

    def validate(self) -> None:
        check_types(self, "embedder")
        check(bool(self.spec), "embedder.spec", self.spec, "a non-empty embedder spec")
        check(self.batch_size > 0, "embedder.batch_size", self.batch_size, "a positive integer")
        check(self.short_texts in ("auto", "same"), "embedder.short_texts", self.short_texts,
              "one of 'auto', 'same'")
        check(self.precision in EMBEDDER_PRECISIONS, "embedder.precision", self.precision,
              "one of " + ", ".join(repr(p) for p in EMBEDDER_PRECISIONS))  # which backends take which: check_specs


@dataclass(frozen=True)
class ClusteringConfig:
    """RAPTOR's soft clustering: UMAP to ``reduction_dim`` dimensions, Gaussian mixtures
    with the count chosen by BIC (at most ``max_clusters``), membership at probability
    > ``threshold``; clusters whose text exceeds ``max_cluster_tokens`` are re-clustered.
    ``bic_search``: ``fast`` (coarse grid of k, then refine) or ``exhaustive`` (every k, as RAPTOR).
    ``processes``: worker processes that cluster the independent steps of a large level (0: one per core
    this process may use; 1: all in this process); the clusters are the same for every value.
    ``sample_above``: a step (global, local or re-clustering) over more rows than this fits UMAP and the
    mixture on a seeded sample of ``sample_size`` rows and assigns every other row (UMAP ``transform``,
    ``predict_proba``); 0 samples every step that has more than ``sample_size`` rows."""

    reduction_dim: int = 10
    threshold: float = 0.1
    max_clusters: int = 50
    max_cluster_tokens: int = 3500
    bic_search: str = "fast"
    processes: int = 0
    sample_above: int = 20_000
    sample_size: int = 5_000

    def validate(self) -> None:
        check_types(self, "clustering")
        check(self.reduction_dim >= 2, "clustering.reduction_dim", self.reduction_dim, "an integer >= 2")
        check(0.0 < self.threshold < 1.0, "clustering.threshold", self.threshold, "a probability in (0, 1)")
        check(self.max_clusters >= 1, "clustering.max_clusters", self.max_clusters, "an integer >= 1")
        check(self.max_cluster_tokens >= 64,
              "clustering.max_cluster_tokens", self.max_cluster_tokens, "an integer >= 64")
        check(self.bic_search in ("fast", "exhaustive"), "clustering.bic_search", self.bic_search,
              "one of 'fast', 'exhaustive'")
        check(self.processes >= 0, "clustering.processes", self.processes,
              "an integer >= 0 (0: one per core, 1: no worker processes)")
        check(self.sample_above >= 0, "clustering.sample_above", self.sample_above,
              "an integer >= 0 (0: sample every step larger than clustering.sample_size)")
        check(self.sample_size >= max(32, 2 * (self.reduction_dim + 2)), "clustering.sample_size", self.sample_size,
              f"an integer >= {max(32, 2 * (self.reduction_dim + 2))} (32 and twice reduction_dim + 2)")


@dataclass(frozen=True)
class TreeConfig:
    """``levels`` counts the leaf level: 4 = leaves + 3 summary levels (the paper)."""

    levels: int = 4
    summary_max_tokens: int = 100

    def validate(self) -> None:
        check_types(self, "tree")
        check(1 <= self.levels <= 10, "tree.levels", self.levels, "an integer from 1 to 10")
        check(self.summary_max_tokens >= 16, "tree.summary_max_tokens", self.summary_max_tokens, "an integer >= 16")


def spacy_model(ner: str) -> str | None:
    """The spaCy pipeline an ``extraction.ner`` value names (``spacy:MODEL``, ``rules+spacy:MODEL``), else None."""
    return ner.split("spacy:", 1)[1] if ner.startswith(("spacy:", "rules+spacy:")) else None


def uses_rule_tagger(ner: str) -> bool:
    """Whether ``extraction.ner`` tags with the rule tagger (alone or in union with spaCy), whose word counts
    the graph stores for query tagging."""
    return not ner.startswith("spacy:")


@dataclass(frozen=True)
class ExtractionConfig:
    """How propositions and entities are extracted for the relatedness tree.

    ``extractor``: ``offline`` (sentences + rule-based entity tagger), ``llm``
    (coreference rewrite + JSON proposition extraction through the LLM) or ``auto`` (the
    default: ``llm`` when an LLM is configured, else ``offline``; resolved by
    :meth:`~sirerag.core.config.BuildConfig.validate`).
    ``ner``: the offline extractor's entity tagger: ``rules``, ``spacy:MODEL`` (an installed spaCy
    pipeline or pipeline folder) or ``rules+spacy:MODEL`` (the union of both taggers' entities).
    ``llm``: a separate LLM spec for extraction (e.g. a fine-tuned adapter);
    None uses the build's LLM.
    ``max_attempts``: extraction requests per chunk at most (retries ask more strictly).
    ``rewrite_max_tokens`` / ``extract_max_tokens``: completion budgets (a rewrite gets
    ``min(rewrite_max_tokens, 2 * chunk tokens + 64)``).
    ``rewrite_min_overlap`` / ``rewrite_max_growth``: the drift guard; a rewrite keeping
    fewer of the original's words, inventing more, or growing more is refused and the
    original text is used.
    ``ground_entities``: drop LLM entities (and facts) that do not occur in the source.
    """

    extractor: str = "auto"
    ner: str = "rules"
    rewrite: bool = True
    max_attempts: int = 2
    llm: str | None = None
    rewrite_max_tokens: int = 512
    extract_max_tokens: int = 1024
    rewrite_min_overlap: float = 0.6
    rewrite_max_growth: float = 2.0
    ground_entities: bool = True

    def validate(self) -> None:
        check_types(self, "extraction")
        check(self.extractor in ("auto", "offline", "llm"), "extraction.extractor", self.extractor,
              "one of 'auto', 'offline', 'llm'")
        check(self.ner == "rules" or bool((spacy_model(self.ner) or "").strip()), "extraction.ner", self.ner,
              "'rules', 'spacy:MODEL' or 'rules+spacy:MODEL'")
        check(self.max_attempts >= 1, "extraction.max_attempts", self.max_attempts, "an integer >= 1")
        for name in ("rewrite_max_tokens", "extract_max_tokens"):
            value = getattr(self, name)
            check(value >= 16, f"extraction.{name}", value, "an integer >= 16")
        check(0.0 < self.rewrite_min_overlap <= 1.0, "extraction.rewrite_min_overlap",
              self.rewrite_min_overlap, "a fraction in (0, 1]")
        check(self.rewrite_max_growth >= 1.0, "extraction.rewrite_max_growth", self.rewrite_max_growth,
              "a number >= 1")


@dataclass(frozen=True)
class RelatednessConfig:
    """Proposition aggregates and the tree above them; the paper's ablations are switches:
    (A) ``summaries=False``; (B) ``include_propositions=True``; (C) (B) with
    ``aggregates=False``; (D) (C) with ``summaries=False``.

    ``aggregate_vectors``: how an aggregate's vector is made. Every proposition is embedded once
    (``propositions.npy``); ``text`` (the default) embeds the aggregate's own (long) text;
    ``token_mean`` takes the renormalised mean of its propositions' vectors weighted by their
    token counts, ``mean`` the unweighted one (no aggregate text embedded: docs/performance.md)."""

    aggregate_max_tokens: int = 512
    skip_redundant_entities: bool = True
    summaries: bool = True
    aggregates: bool = True
    include_propositions: bool = False
    aggregate_vectors: str = "text"

    def validate(self) -> None:
        check_types(self, "relatedness")
        check(self.aggregate_max_tokens >= 16,
              "relatedness.aggregate_max_tokens", self.aggregate_max_tokens, "an integer >= 16")
        check(self.aggregates or self.include_propositions, "relatedness.aggregates", self.aggregates,
              "True unless relatedness.include_propositions is True (ablation C)")
        check(self.aggregate_vectors in AGGREGATE_VECTORS, "relatedness.aggregate_vectors", self.aggregate_vectors,
              "one of " + ", ".join(repr(c) for c in AGGREGATE_VECTORS))


@dataclass(frozen=True)
class GraphConfig:
    """The entity graph for the Personalized PageRank retriever (``--graph``).

    Synonym edges join entities with embedding cosine >= ``synonym_threshold``, at most
    ``synonym_max_neighbors`` per entity. ``damping``, ``tol`` and ``max_iter`` are the
    PageRank defaults recorded with the graph (a search may override them). Each
    document's title is an entity node tied to its passages with ``title_weight`` (0: no
    title nodes). ``embed_facts`` also embeds the propositions for ``--linking fact``
    (otherwise a fact-linking search embeds them when it loads). ``name_vectors``: what embeds the entity
    names (synonym edges, linking a query's unmatched entities): ``auto`` (the default), MiniLM's int8 export
    when the index embeds with MiniLM, else the index's short-text embedder; ``int8``, always MiniLM's int8
    export; ``index``, the index's short-text embedder; or ``static``, a static embedder distilled from MiniLM
    (extra ``static``; docs/experiments/2026-11-27-build-cost-levers.md). ``synonym_ann_min_names``: with at least
    this many names that may get synonyms, their kNN searches an HNSW index of the names (built with the
    ``[dense]`` HNSW settings; extra ``ann``) instead of comparing every name with every other; 0 always, -1 never
    (docs/scale.md)."""

    enabled: bool = False
    title_weight: float = 2.0
    embed_facts: bool = False
    synonym_threshold: float = 0.8
    synonym_max_neighbors: int = 100
    damping: float = 0.5
    tol: float = 1e-6
    max_iter: int = 100
    name_vectors: str = "auto"
    synonym_ann_min_names: int = 100_000

    def validate(self) -> None:
        check_types(self, "graph")
        check(self.synonym_ann_min_names >= -1, "graph.synonym_ann_min_names", self.synonym_ann_min_names,
              "an integer >= 0 (or -1: never)")
        check(self.name_vectors in NAME_VECTORS, "graph.name_vectors", self.name_vectors,
              "one of " + ", ".join(repr(c) for c in NAME_VECTORS))
        check(self.title_weight >= 0, "graph.title_weight", self.title_weight, "a number >= 0")
        check(0.0 < self.synonym_threshold <= 1.0, "graph.synonym_threshold", self.synonym_threshold,
              "a cosine similarity in (0, 1]")
        check(self.synonym_max_neighbors >= 0,
              "graph.synonym_max_neighbors", self.synonym_max_neighbors, "an integer >= 0")
        check(0.0 <= self.damping < 1.0, "graph.damping", self.damping, "a number in [0, 1)")
        check(0.0 < self.tol < 1.0, "graph.tol", self.tol, "a positive number below 1")
        check(self.max_iter >= 1, "graph.max_iter", self.max_iter, "an integer >= 1")

#: the sections of a BuildConfig (its fields besides trees and seed): name -> dataclass
SECTIONS: dict[str, type] = {
    "corpus": CorpusConfig,
    "chunking": ChunkingConfig,
    "embedder": EmbedderConfig,
    "clustering": ClusteringConfig,
    "tree": TreeConfig,
    "llm": LLMConfig,
    "extraction": ExtractionConfig,
    "relatedness": RelatednessConfig,
    "graph": GraphConfig,
    "engine": EngineConfig,
    "dense": DenseConfig,
}
