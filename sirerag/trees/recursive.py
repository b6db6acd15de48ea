"""Recursive summary levels above a base level: the part both trees share.

Level ``l`` is built from level ``l - 1``: its nodes are clustered
(:func:`sirerag.clustering.cluster`), every cluster is summarised (one
``summarize`` call per level, so model backends can batch the whole level), and
the summaries are embedded. The recursion stops after ``levels - 1`` summary
levels, or earlier when

- a level has a single node (it is the root), or
- clustering returns a single cluster: its summary is the root. A level of at most
  ``reduction_dim + 1`` nodes is always one cluster (unless the nodes' text exceeds
  ``max_cluster_tokens``), so a small level gets one root summary above it, where
  RAPTOR would stop without one;
- clustering returns as many clusters as there are nodes: another level would not
  make the tree any smaller.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

import numpy as np

from sirerag.clustering import ClusterStats, cluster
from sirerag.core.config import ClusteringConfig
from sirerag.core.errors import SireragError, check
from sirerag.core.memory import release_free_memory
from sirerag.text.tokens import count_tokens_many
from sirerag.trees.base import Summarizer, TreeResult, TreeStats
from sirerag.core.types import Node, Tree
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)


def build_summary_levels(
    base: TreeResult,
    *,
    tree_name: Tree,
    embedder: Embedder,
    summarizer: Summarizer,
    clustering: ClusteringConfig,
    levels: int,
    random_state: int,
    show_progress: bool = True,
    cluster_stats: ClusterStats | None = None,
    first_level: int = 0,
) -> TreeResult:
    """Build up to ``levels - 1`` summary levels above ``base``.

    Args:
        base: the level-0 nodes (leaves or aggregates) and their embeddings.
        tree_name: ``similarity`` or ``relatedness``; set on every summary node.
        embedder: an :class:`~sirerag.embedding.Embedder`; summaries are encoded with
            ``encode_documents``.
        summarizer: a :class:`~sirerag.trees.base.Summarizer`.
        clustering: the clustering settings (see :func:`sirerag.clustering.cluster`).
        levels: levels of the whole tree, counting the base level (4 = base + 3).
        random_state: seed for clustering.
        show_progress: show a progress bar over the levels.
        cluster_stats: collects the clustering counters of every level when given
            (e.g. with ``keep_reduced=True`` to rerun the BIC searches in a benchmark).
        first_level: the level of ``base`` in its tree (an incremental update grows a tree
            above its old top level); summaries are numbered from ``first_level + 1``.

    Returns:
        A :class:`TreeResult` with the base nodes first, then each summary level, and
        the embeddings stacked in the same order. A summary node's ``children`` are the
        ids of its cluster's members (in level order) and its ``passages`` the union of
        theirs, in first-seen order. ``stats`` holds per-level counts, the stop reason,
        clustering counters and seconds spent clustering, summarising and embedding.

    Raises:
        ConfigError: an argument is invalid.
        SireragError: the summariser or embedder returned the wrong number of results.
    """
    from tqdm.auto import tqdm

    clustering.validate()
    check(isinstance(levels, int) and levels >= 1, "levels", levels, "an integer >= 1")
    embeddings = np.asarray(base.embeddings, dtype=np.float32)
    check(embeddings.ndim == 2 and len(embeddings) == len(base.nodes), "base.embeddings",
          getattr(base.embeddings, "shape", None), f"a 2-D array with one row per base node ({len(base.nodes)})")
    nodes: list[Node] = list(base.nodes)
    blocks: list[np.ndarray] = [embeddings]
    current, current_emb = list(base.nodes), embeddings
    counters = cluster_stats if cluster_stats is not None else ClusterStats()
    seconds = {"clustering": 0.0, "summarizing": 0.0, "embedding": 0.0}
    per_level: list[dict[str, Any]] = [{"level": 0, "nodes": len(current)}]
    stop = "levels"
    bar = tqdm(range(1, levels), desc=f"{tree_name} tree", unit="level", disable=not show_progress)
    for level in bar:
        if len(current) <= 1:
            stop = "single node" if current else "empty"
            break
        start = time.perf_counter()
        counts = count_tokens_many([n.text for n in current])
        clusters = cluster(current_emb, counts, config=clustering, random_state=random_state, stats=counters)
        release_free_memory()  # UMAP's and the mixtures' scratch arrays
        seconds["clustering"] += time.perf_counter() - start
        if len(clusters) >= len(current):
            stop = "no reduction"
            logger.info("%s tree: level %d would have as many nodes (%d) as level %d; stopping",
                        tree_name, level, len(clusters), level - 1)
            break
        new_nodes, new_emb = _summary_level(current, clusters, tree_name=tree_name, level=first_level + level,
                                            embedder=embedder, summarizer=summarizer, seconds=seconds)
        nodes.extend(new_nodes)
        blocks.append(new_emb)
        per_level.append({"level": first_level + level, "nodes": len(new_nodes), "clusters": len(clusters),
                          "mean_cluster_size": round(float(np.mean([len(c) for c in clusters])), 3)})
        logger.info("%s tree: level %d has %d summaries of %d nodes", tree_name, first_level + level, len(new_nodes),
                    len(current))
        current, current_emb = new_nodes, new_emb
        if len(clusters) == 1:
            stop = "root"
            break
    bar.close()
    stats = TreeStats(levels=tuple(per_level), stop_reason=stop, seconds={k: round(v, 3) for k, v in seconds.items()},
                      clustering=counters.as_dict())
    return TreeResult(nodes=tuple(nodes), embeddings=np.vstack(blocks), stats=stats)


def _summary_level(
    current: Sequence[Node],
    clusters: Sequence[np.ndarray],
    *,
    tree_name: Tree,
    level: int,
    embedder: Embedder,
    summarizer: Summarizer,
    seconds: dict[str, float],
) -> tuple[list[Node], np.ndarray]:
    """Summarise and embed one level's clusters; returns the new nodes and their rows."""
    groups = [[current[i].text for i in members] for members in clusters]
    start = time.perf_counter()
    summaries = list(summarizer.summarize(groups))
    seconds["summarizing"] += time.perf_counter() - start
    if len(summaries) != len(groups):
        raise SireragError(f"summarizer {getattr(summarizer, 'spec', summarizer)!r} returned {len(summaries)} "
                           f"summaries for {len(groups)} clusters")
    start = time.perf_counter()
    emb = np.asarray(embedder.encode_documents(summaries), dtype=np.float32)
    seconds["embedding"] += time.perf_counter() - start
    if emb.ndim != 2 or len(emb) != len(summaries):
        raise SireragError(f"embedder {getattr(embedder, 'spec', embedder)!r} returned shape {emb.shape} "
                           f"for {len(summaries)} summaries")
    new_nodes = []
    for members, text in zip(clusters, summaries):
        children = tuple(current[i].id for i in members)
        passages = tuple(dict.fromkeys(p for i in members for p in current[i].passages))
        new_nodes.append(Node(id=Node.make_id("summary", tree_name, level, text, children), text=text,
                              kind="summary", tree=tree_name, level=level, children=children, passages=passages))
    return new_nodes, emb
