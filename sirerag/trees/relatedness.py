"""The relatedness tree: proposition aggregates as leaves, recursive summaries above (paper 4.2-4.3).

The tree is built on its own (no clustering across the two trees, paper 4.3) with
the same clustering and summariser as the similarity tree. The paper's ablations
are switches of :class:`~sirerag.core.config.RelatednessConfig`
(``summaries`` / ``aggregates`` / ``include_propositions``):

- SiReRAG (default) ``True/True/False``: aggregates + their summaries;
- (A) minus relatedness summaries ``False/True/False``: aggregates only;
- (B) plus propositions ``True/True/True``: the default + every proposition;
- (C) (B) minus aggregates ``True/False/True``: propositions + summaries over them;
- (D) (C) minus summaries ``False/False/True``: propositions only.

In (B) the propositions are added to the pool beside the tree (they are not
clustered); in (C)/(D) they take the aggregates' place as the tree's base. Only
entity-linked propositions are used, as for the aggregates.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Sequence

import numpy as np

from sirerag.core.config import ClusteringConfig, RelatednessConfig, TreeConfig
from sirerag.trees.aggregates import build_aggregates, ordered_linked
from sirerag.trees.base import Summarizer, TreeResult, TreeStats
from sirerag.trees.proposition_vectors import derived_vectors, embed_propositions, node_vectors
from sirerag.trees.recursive import build_summary_levels
from sirerag.core.types import Node, Proposition, collapse_ws
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)


def variant_name(relatedness: RelatednessConfig) -> str:
    """``full``, ``A``, ``B``, ``C``, ``D`` (the paper's ablations) or ``custom``."""
    key = (relatedness.summaries, relatedness.aggregates, relatedness.include_propositions)
    return {(True, True, False): "full", (False, True, False): "A", (True, True, True): "B",
            (True, False, True): "C", (False, False, True): "D"}.get(key, "custom")


def proposition_nodes(propositions: Sequence[Proposition]) -> list[Node]:
    """One ``kind="proposition"`` node per distinct entity-linked proposition text; a text seen
    in several documents is one node listing all of them."""
    nodes: dict[str, Node] = {}
    for prop in ordered_linked(propositions):
        text = collapse_ws(prop.text)
        node_id = Node.make_id("proposition", "relatedness", 0, text)
        old = nodes.get(node_id)
        if old is None:
            nodes[node_id] = Node(id=node_id, text=text, kind="proposition", tree="relatedness", level=0,
                                  passages=(prop.doc_id,), propositions=(prop.id,))
        else:
            nodes[node_id] = Node(id=node_id, text=text, kind="proposition", tree="relatedness", level=0,
                                  passages=tuple(dict.fromkeys(old.passages + (prop.doc_id,))),
                                  propositions=old.propositions + (prop.id,))
    return list(nodes.values())


def build_relatedness_tree(
    propositions: Sequence[Proposition],
    *,
    embedder: Embedder,
    summarizer: Summarizer,
    clustering: ClusteringConfig,
    tree: TreeConfig,
    relatedness: RelatednessConfig,
    random_state: int,
    show_progress: bool = True,
    proposition_vectors: np.ndarray | None = None,
) -> TreeResult:
    """Build the relatedness tree from extracted propositions.

    Args:
        propositions: from :func:`sirerag.extraction.extract`, in document order.
        embedder: encodes aggregates, propositions and summaries (``encode_documents``).
        summarizer: writes one summary per cluster.
        clustering: UMAP + Gaussian-mixture settings (shared with the similarity tree).
        tree: ``levels`` counting the base level.
        relatedness: aggregate cap, redundant-entity rule and the ablation switches.
        random_state: seed for clustering.
        show_progress: progress bars.
        proposition_vectors: one row per proposition of ``propositions``
            (:func:`~sirerag.trees.proposition_vectors.embed_propositions`); the base nodes' vectors
            are derived from them by ``relatedness.aggregate_vectors``
            (:func:`~sirerag.trees.proposition_vectors.node_vectors`). None: embedded here when needed.

    Returns:
        A :class:`TreeResult`: the base nodes (aggregates, or propositions in ablations C/D),
        the summary levels, then (ablation B) the propositions; ``stats`` holds the Table 3
        figures (``table3``), the aggregation rule, the variant and the levels.

    Raises:
        ConfigError: a setting is invalid.
    """
    relatedness.validate()
    tree.validate()
    variant = variant_name(relatedness)
    agg = build_aggregates(propositions, max_tokens=relatedness.aggregate_max_tokens,
                           skip_redundant=relatedness.skip_redundant_entities)
    props = proposition_nodes(propositions) if relatedness.include_propositions else []
    base_nodes = list(agg.nodes) if relatedness.aggregates else props
    extra = props if relatedness.aggregates else []
    stats = TreeStats(variant=variant, table3=agg.stats, aggregation_rule=agg.stats["aggregation_rule"])
    if not base_nodes:
        logger.warning("relatedness tree: no entity-linked propositions, so the tree is empty")
        dim = int(getattr(embedder, "dim", 0))
        return TreeResult(nodes=(), embeddings=np.zeros((0, dim), dtype=np.float32),
                          stats=replace(stats, nodes=0))
    start = time.perf_counter()
    mode = relatedness.aggregate_vectors
    if mode != "text" and proposition_vectors is None:
        proposition_vectors = embed_propositions(embedder, propositions)
    base_emb = node_vectors(base_nodes, propositions, proposition_vectors, embedder, mode=mode)
    base_seconds = round(time.perf_counter() - start, 3)
    base = TreeResult(nodes=tuple(base_nodes), embeddings=base_emb)
    if relatedness.summaries:
        built = build_summary_levels(base, tree_name="relatedness", embedder=embedder, summarizer=summarizer,
                                     clustering=clustering, levels=tree.levels, random_state=random_state,
                                     show_progress=show_progress)
        stats = replace(stats, levels=built.stats.levels, stop_reason=built.stats.stop_reason,
                        seconds={"embedding_base": base_seconds, **(built.stats.seconds or {})},
                        clustering=built.stats.clustering)
        nodes, embeddings = list(built.nodes), built.embeddings
    else:
        stats = replace(stats, levels=({"level": 0, "nodes": len(base_nodes)},), stop_reason="summaries disabled",
                        seconds={"embedding_base": base_seconds})
        nodes, embeddings = base_nodes, base_emb
    if extra:
        extra_emb = np.asarray(embedder.encode_documents([n.text for n in extra]), dtype=np.float32) \
            if proposition_vectors is None else derived_vectors(extra, propositions, proposition_vectors, mode="mean")
        nodes = nodes + extra
        embeddings = np.vstack([embeddings, extra_emb])
    by_kind: dict[str, int] = {}
    for node in nodes:
        by_kind[node.kind] = by_kind.get(node.kind, 0) + 1
    stats = replace(stats, nodes=len(nodes), by_kind=by_kind)
    logger.info("relatedness tree (%s): %s", variant, by_kind)
    return TreeResult(nodes=tuple(nodes), embeddings=np.asarray(embeddings, dtype=np.float32), stats=stats)
