"""Updating a built tree in place: new base nodes join the clusters they fit, removed ones leave,
and only the summaries of clusters whose members changed are written again.

A level's clusters are its parents' ``children`` lists. Going up one level at a time:

1. every old cluster keeps the members that are still there; a member that was re-summarised
   below is replaced by its successor(s), in place;
2. a new member (a new leaf or aggregate, or the summary of a new cluster below) joins the
   old cluster whose **centroid in the embedding space** is most cosine-similar to it, when
   that similarity reaches the cluster's threshold: the median similarity of the cluster's
   own old members to their centroid. UMAP is non-parametric (a new point has no place in the
   old reduction without refitting it), so the assignment works on the stored embeddings; the
   centroids are the means of the members' stored pool rows, computed when needed, so indexes
   built before this existed are updated the same way;
3. new members that fit no cluster are clustered among themselves with the build's clustering
   (:func:`sirerag.clustering.cluster`) and start new clusters;
4. a changed cluster whose members' text exceeds ``max_cluster_tokens`` is split with the same
   clustering; a cluster left without members is dropped;
5. the changed clusters are summarised (one ``summarize`` call per level) and embedded; an
   unchanged cluster keeps its summary node, and so its content-hash id.

Two kinds of changed cluster keep their summary text instead (no model call, the stored row):

- its members' texts are the same as before (only their ids changed, e.g. a child below kept
  its text): the summarised input is the same, so is the summary;
- **bounded staleness**: the tokens added to or dropped from its members' texts since the
  summary was written (the two bags of tokens compared: a new member counts all its tokens, a
  member whose text grew by one proposition only those of the proposition; accumulated over
  updates in ``staleness``, by node id) are at most ``refresh_threshold`` times its members' tokens. Past that share it is written again
  (and its count starts again from zero). ``refresh_threshold=0`` rewrites every cluster whose
  members' texts changed. A summary that quotes a sentence only a dropped member held (words of an
  edited or removed document) is always written again.

Such a node gets its new ``children`` and ``passages`` exactly, and so a new content-hash id
(text + children), as any node whose children change.

When the old top level was a single root (or the tree had no summary levels) and the update
leaves more than one node there, new levels are built above it as a build would.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from sirerag.clustering import cluster
from sirerag.core.config import ClusteringConfig
from sirerag.core.errors import SireragError
from sirerag.text.tokens import count_tokens_many
from sirerag.trees.staleness import Staleness
from sirerag.trees.base import Summarizer, TreeResult
from sirerag.trees.recursive import build_summary_levels
from sirerag.core.types import Node, Tree
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)


@dataclass
class UpdateStats:
    """What an update did to one tree (counts over all its levels)."""

    base_added: int = 0
    base_removed: int = 0
    summaries_written: int = 0
    summaries_kept: int = 0
    summaries_same_text: int = 0
    summaries_stale: int = 0
    joined: int = 0
    new_clusters: int = 0
    split_clusters: int = 0
    dropped_clusters: int = 0
    levels_grown: int = 0
    per_level: list[dict[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Group:
    parent: Node | None
    members: list[str]


def old_levels(nodes: Sequence[Node], tree: str, base_kinds: tuple[str, ...]) -> list[list[Node]]:
    """The nodes of ``tree`` by level (level 0 = nodes of ``base_kinds``), in pool order."""
    levels: list[list[Node]] = []
    for node in nodes:
        if node.tree != tree or (node.level == 0 and node.kind not in base_kinds):
            continue
        while len(levels) <= node.level:
            levels.append([])
        levels[node.level].append(node)
    return levels or [[]]


def update_tree(old: list[list[Node]], base: Sequence[Node], vectors: dict[str, np.ndarray], *, tree_name: Tree,
                embedder: Embedder, summarizer: Summarizer, clustering: ClusteringConfig, levels: int,
                random_state: int, successors: dict[str, list[str]] | None = None, refresh_threshold: float = 0.0,
                staleness: dict[str, int] | None = None) -> tuple[list[list[Node]], UpdateStats]:
    """Update the tree ``old`` (nodes by level) to the new base level ``base``.

    Args:
        old: the tree's nodes by level, as :func:`old_levels` returns them.
        base: the new level-0 nodes, in order (kept old ones keep their ids).
        vectors: embedding row by node id: every old node and every new base node; the rows of
            the summaries written here are added to it.
        tree_name, embedder, summarizer, clustering, levels, random_state: as for a build.
        successors: old base id -> the new base ids that replace it (an aggregate whose entity got
            new propositions); they take its place in its clusters instead of being assigned anew.
        refresh_threshold: the share of changed member tokens up to which a changed cluster keeps its
            summary text (see the module docstring); 0 rewrites every cluster whose members' texts changed.
        staleness: summary id -> member tokens changed since its text was written; read, and updated
            in place to the nodes of the new tree (a node without an entry is up to date).

    Returns:
        The new nodes by level, and what changed.
    """
    staleness = staleness if staleness is not None else {}
    old_base, new_base = {n.id for n in old[0]}, {n.id for n in base}
    stats = UpdateStats(base_added=len(new_base - old_base), base_removed=len(old_base - new_base))
    result: list[list[Node]] = [list(base)]
    successors = dict(successors or {})
    for level in range(1, len(old)):
        prev_old, prev_new = old[level - 1], result[-1]
        if [(n.id, n.passages) for n in prev_old] == [(n.id, n.passages) for n in prev_new]:
            result.extend(list(nodes) for nodes in old[level:])  # nothing below changed: the rest stands
            break
        nodes, successors = _update_level(old[level], prev_old, prev_new, successors, vectors, stats,
                                          Staleness(refresh_threshold, staleness), tree_name=tree_name,
                                          level=level, embedder=embedder, summarizer=summarizer,
                                          clustering=clustering, random_state=random_state)
        if not nodes:
            break
        result.append(nodes)
    while len(result) > 1 and not result[-1]:
        result.pop()
    top = result[-1]
    if len(top) > 1 and len(result) < levels and (len(old) == 1 or len(old[-1]) <= 1):
        grown = build_summary_levels(
            TreeResult(nodes=tuple(top), embeddings=np.vstack([vectors[n.id] for n in top])), tree_name=tree_name,
            embedder=embedder, summarizer=summarizer, clustering=clustering, levels=levels - len(result) + 1,
            random_state=random_state, show_progress=False, first_level=len(result) - 1)
        for node, row in zip(grown.nodes[len(top):], grown.embeddings[len(top):]):
            vectors[node.id] = row
            if node.level >= len(result):
                result.append([])
            result[node.level].append(node)
            stats.summaries_written += 1
        stats.levels_grown = len(grown.stats.levels) - 1
    present = {n.id for nodes in result for n in nodes}
    for node_id in [i for i in staleness if i not in present]:
        del staleness[node_id]
    return result, stats


def _update_level(parents: Sequence[Node], prev_old: Sequence[Node], prev_new: Sequence[Node],
                  successors: dict[str, list[str]], vectors: dict[str, np.ndarray], stats: UpdateStats,
                  staleness: Staleness, *,
                  tree_name: Tree, level: int, embedder: Embedder, summarizer: Summarizer, clustering: ClusteringConfig,
                  random_state: int) -> tuple[list[Node], dict[str, list[str]]]:
    by_id = {n.id: n for n in prev_new}
    old_ids = {n.id for n in prev_old}
    groups: list[_Group] = []
    placed: set[str] = set()
    for parent in parents:
        members: list[str] = []
        for child in parent.children:
            members.extend([child] if child in by_id else successors.get(child, []))
        members = [m for m in dict.fromkeys(members) if m in by_id]
        placed.update(members)
        groups.append(_Group(parent, members))
    free = [n.id for n in prev_new if n.id not in placed and n.id not in old_ids]
    if len(parents) == 1 and set(parents[0].children) == old_ids:  # a root over the whole level takes all
        groups[0].members.extend(free)
        stats.joined += len(free)
        free = []
    unassigned = _assign(free, groups, vectors, stats)
    tokens = dict(zip(by_id, count_tokens_many([n.text for n in prev_new])))
    if unassigned:
        for rows in _clusters(unassigned, vectors, tokens, clustering, random_state):
            groups.append(_Group(None, [unassigned[i] for i in rows]))
            stats.new_clusters += 1
    groups = _split_oversized(groups, vectors, tokens, clustering, random_state, stats)
    old_by_id = {n.id: n for n in prev_old}
    parts = Counter(g.parent.id for g in groups if g.parent is not None)
    kept: list[Node | None] = []
    todo: list[_Group] = []
    for group in groups:
        old_parent = group.parent
        if not group.members:
            stats.dropped_clusters += 1
        elif old_parent is not None and tuple(group.members) == old_parent.children:
            passages = tuple(dict.fromkeys(p for m in group.members for p in by_id[m].passages))
            kept.append(old_parent if passages == old_parent.passages else replace(old_parent, passages=passages))
        elif old_parent is not None and parts[old_parent.id] == 1 and \
                (node := staleness.keep(old_parent, group.members, by_id, old_by_id, tokens, stats)) is not None:
            vectors[node.id] = vectors[old_parent.id]
            kept.append(node)
        else:
            kept.append(None)
            todo.append(group)
    written = _summarise(todo, by_id, vectors, tree_name=tree_name, level=level, embedder=embedder,
                         summarizer=summarizer)
    stats.summaries_written += len(written)
    new_successors: dict[str, list[str]] = {p.id: [] for p in parents}
    out: dict[str, Node] = {}
    fresh = iter(written)
    for group, node in zip([g for g in groups if g.members], kept):
        node = node if node is not None else next(fresh)
        out.setdefault(node.id, node)
        if group.parent is not None:  # an unchanged parent is its own successor
            new_successors[group.parent.id].append(node.id)
    stats.summaries_kept += sum(1 for n in kept if n is not None)
    stats.per_level.append({"level": level, "nodes": len(out), "written": len(written)})
    return list(out.values()), new_successors


def _assign(free: list[str], groups: list[_Group], vectors: dict[str, np.ndarray], stats: UpdateStats) -> list[str]:
    """Put each free node into the old cluster it fits (see the module docstring); returns the rest."""
    olds = [g for g in groups if g.parent is not None and g.parent.children]
    if not free or not olds:
        return list(free)
    centroids, thresholds = [], []
    for group in olds:
        rows = np.vstack([vectors[c] for c in group.parent.children])  # type: ignore[union-attr]
        centroid = rows.mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        centroids.append(centroid)
        thresholds.append(float(np.median(rows @ centroid)) if len(rows) > 1 else np.nan)
    limits = np.asarray(thresholds)
    spread = limits[~np.isnan(limits)]
    limits[np.isnan(limits)] = float(np.median(spread)) if len(spread) else 1.0
    sims = np.vstack([vectors[f] for f in free]) @ np.vstack(centroids).T
    rest = []
    for i, node_id in enumerate(free):
        best = int(np.argmax(sims[i]))
        if sims[i, best] >= limits[best]:
            olds[best].members.append(node_id)
            stats.joined += 1
        else:
            rest.append(node_id)
    return rest


def _clusters(ids: list[str], vectors: dict[str, np.ndarray], tokens: dict[str, int], clustering: ClusteringConfig,
              random_state: int) -> list[np.ndarray]:
    if len(ids) == 1:
        return [np.array([0])]
    return cluster(np.vstack([vectors[i] for i in ids]), [tokens[i] for i in ids], config=clustering,
                   random_state=random_state)


def _split_oversized(groups: list[_Group], vectors: dict[str, np.ndarray], tokens: dict[str, int],
                     clustering: ClusteringConfig, random_state: int, stats: UpdateStats) -> list[_Group]:
    out = []
    for group in groups:
        changed = group.parent is None or tuple(group.members) != group.parent.children
        if not changed or len(group.members) < 2 or \
                sum(tokens[m] for m in group.members) <= clustering.max_cluster_tokens:
            out.append(group)
            continue
        parts = _clusters(group.members, vectors, tokens, clustering, random_state)
        stats.split_clusters += len(parts) > 1
        out.extend(_Group(group.parent, [group.members[i] for i in rows]) for rows in parts)
    return out


def _summarise(groups: list[_Group], by_id: dict[str, Node], vectors: dict[str, np.ndarray], *, tree_name: Tree,
               level: int, embedder: Embedder, summarizer: Summarizer) -> list[Node]:
    if not groups:
        return []
    texts = list(summarizer.summarize([[by_id[m].text for m in g.members] for g in groups]))
    if len(texts) != len(groups):
        raise SireragError(f"summarizer {getattr(summarizer, 'spec', summarizer)!r} returned {len(texts)} "
                           f"summaries for {len(groups)} clusters")
    rows = np.asarray(embedder.encode_documents(texts), dtype=np.float32)
    nodes = []
    for group, text, row in zip(groups, texts, rows):
        children = tuple(group.members)
        passages = tuple(dict.fromkeys(p for m in children for p in by_id[m].passages))
        node = Node(id=Node.make_id("summary", tree_name, level, text, children), text=text, kind="summary",
                    tree=tree_name, level=level, children=children, passages=passages)
        vectors[node.id] = row
        nodes.append(node)
    return nodes
