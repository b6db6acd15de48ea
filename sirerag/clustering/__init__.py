"""RAPTOR's soft clustering: numpy rows in, clusters of row indices out.

No text and no I/O here; the trees turn clusters into summary nodes.
"""
from __future__ import annotations

from sirerag.clustering.gmm import ClusterStats, search_k
from sirerag.clustering.raptor import cluster, consecutive_runs

__all__ = ["ClusterStats", "cluster", "consecutive_runs", "search_k"]
