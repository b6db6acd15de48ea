"""The similarity tree: RAPTOR's recursive clustering and summaries over the chunks."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sirerag.core.config import ClusteringConfig, TreeConfig
from sirerag.core.errors import InputError, check
from sirerag.trees.base import Summarizer, TreeResult, TreeStats
from sirerag.trees.recursive import build_summary_levels
from sirerag.core.types import Chunk, Node
from sirerag.embedding.base import Embedder


def leaves_from_chunks(chunks: Sequence[Chunk], embeddings: np.ndarray) -> TreeResult:
    """One level-0 leaf per chunk (``id`` = chunk id, ``passages`` = its document).

    Raises:
        ConfigError: ``embeddings`` does not have one row per chunk.
        InputError: two chunks share an id.
    """
    matrix = np.asarray(embeddings, dtype=np.float32)
    check(matrix.ndim == 2 and len(matrix) == len(chunks), "leaf embeddings", getattr(embeddings, "shape", None),
          f"a 2-D array with one row per chunk ({len(chunks)})")
    nodes = tuple(Node(id=c.id, text=c.text, kind="leaf", tree="similarity", level=0, passages=(c.doc_id,))
                  for c in chunks)
    if len({n.id for n in nodes}) != len(nodes):
        raise InputError("chunks contain duplicate ids; each chunk must be a distinct (document, index, text)")
    return TreeResult(nodes=nodes, embeddings=matrix, stats=TreeStats(levels=({"level": 0, "nodes": len(nodes)},)))


def build_similarity_tree(
    chunks: Sequence[Chunk],
    leaf_embeddings: np.ndarray,
    *,
    embedder: Embedder,
    summarizer: Summarizer,
    clustering: ClusteringConfig,
    tree: TreeConfig,
    random_state: int,
    show_progress: bool = True,
) -> TreeResult:
    """Leaves plus up to ``tree.levels - 1`` levels of cluster summaries (RAPTOR).

    Args:
        chunks: the leaves' chunks, in corpus order.
        leaf_embeddings: one row per chunk.
        embedder: encodes the summaries (``encode_documents``).
        summarizer: writes one summary per cluster.
        clustering: UMAP + Gaussian-mixture settings.
        tree: ``levels`` (counting the leaves).
        random_state: seed for every UMAP and mixture fit.
        show_progress: show a progress bar.

    Returns:
        All nodes, leaves first, with embeddings in the same order; see
        :func:`sirerag.trees.recursive.build_summary_levels`.
    """
    tree.validate()
    base = leaves_from_chunks(chunks, leaf_embeddings)
    return build_summary_levels(base, tree_name="similarity", embedder=embedder, summarizer=summarizer,
                                clustering=clustering, levels=tree.levels, random_state=random_state,
                                show_progress=show_progress)
