"""Ranking a SiReRAG pool so that summaries and aggregates never push out the passages.

A retriever ranks every pool entry on one scale; in a full pool, summaries and
aggregates (which cover several passages and match many queries a little) can fill
the top ranks and take the reading budget from the passages they came from. The
rule here rearranges any retriever's ranking, using only the pool's structure:

* **drop covered**: an entry whose passages are all already covered by the entries
  ranked before it adds nothing new to the reading context and is dropped;
* **anchor**: a summary or aggregate waits until one of its passages has been ranked
  (it is placed right after the first leaf of a passage it covers), so it extends
  what the passages found instead of replacing them;
* **leaf share**: at any prefix of the ranking, at least ``leaf_share`` of the entries
  are leaves; other entries beyond that wait for the next leaf;
* **lift** (``lift_ratio``, off at 0): a summary or aggregate that is anchored but waits
  for the share, and scores at least ``lift_ratio`` times the leaf about to be placed,
  places the leaf of its best passage not yet ranked first. The share keeps long entries
  from taking the reading budget, but it also let leaves that score a fraction of such an
  entry push the passage it brings (a graph retriever's second hop, reached through an
  aggregate that shares an entity with the first passage) down the ranking. The passage's
  own leaf is short and counts as a leaf, so the share still holds.

Entries that are still waiting when the retriever's list ends follow in their order.
A pool of leaves is returned unchanged. The rule's settings are :class:`~sirerag.core.config.retrieval.PoolRule`.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from sirerag.core.config.retrieval import PoolRule
from sirerag.retrievers.base import Closing, Hit, Retriever, SearchOne
from sirerag.core.types import Node, Pool


def arrange(hits: Sequence[Hit], pool: Pool, rule: PoolRule,
            leaves_of: Callable[[str], Sequence[Node]] | None = None) -> list[Hit]:
    """Rearrange a ranking of pool entries by ``rule``; leaves keep their relative order, except those a
    lift places early. ``leaves_of``: a passage's leaf entries in pool order, as :meth:`Pool.leaves_of` gives
    them (a retriever that knows them without reading every leaf's passages); None: the pool's."""
    out: list[Hit] = []
    covered: set[str] = set()
    waiting: list[Hit] = []
    n_leaves = 0
    scores = {hit.entry_id: hit.score for hit in hits} if rule.lift_ratio else {}
    known: dict[str, Sequence[str]] = {}  # a waiting entry is tried after every leaf: its passages read once

    def passages_of(hit: Hit) -> Sequence[str]:
        found = known.get(hit.entry_id)
        if found is None:
            found = known[hit.entry_id] = pool.get(hit.entry_id).passages
        return found

    def room() -> bool:  # may one more non-leaf entry be placed now?
        return n_leaves >= rule.leaf_share * (len(out) + 1) - 1e-9

    def adds_nothing(passages: Sequence[str]) -> bool:  # to be dropped: every passage already ranked
        return rule.drop_covered and bool(passages) and covered.issuperset(passages)

    def place(hit: Hit) -> bool:
        passages = passages_of(hit)
        if adds_nothing(passages):
            return True  # nothing new: dropped
        if rule.anchor and passages and covered.isdisjoint(passages):
            return False
        if not room():
            return False
        out.append(hit)
        covered.update(passages)
        return True

    def add_leaf(hit: Hit, passages: Sequence[str]) -> None:
        nonlocal n_leaves
        out.append(hit)
        n_leaves += 1
        covered.update(passages)

    for hit in hits:
        entry = pool.get(hit.entry_id)
        if entry.kind != "leaf":
            if not place(hit):
                waiting.append(hit)
            continue
        if adds_nothing(entry.passages):
            continue
        if waiting and rule.lift_ratio:
            for lifted in _lifts(waiting, hit.score * rule.lift_ratio, pool, covered, scores,
                                 leaves_of or pool.leaves_of):
                add_leaf(lifted, pool.get(lifted.entry_id).passages)
            waiting = [h for h in waiting if not place(h)]
            if adds_nothing(entry.passages):  # a lifted leaf ranked its passage
                continue
        add_leaf(hit, entry.passages)
        waiting = [h for h in waiting if not place(h)]
    for hit in waiting:  # the retriever's list is exhausted: the rest in order
        passages = passages_of(hit)
        if not adds_nothing(passages):
            out.append(hit)
            covered.update(passages)
    return out


def _lifts(waiting: Sequence[Hit], bar: float, pool: Pool, covered: set[str],
           scores: dict[str, float], leaves_of: Callable[[str], Sequence[Node]]) -> list[Hit]:
    """For each waiting entry that is anchored and scores at least ``bar``, in order: the best-scoring leaf of
    a passage of it not yet covered (its score from the ranking, else the waiting entry's)."""
    out: list[Hit] = []
    if all(hit.score < bar for hit in waiting):
        return out
    taken: set[str] = set(covered)
    for hit in waiting:
        passages = pool.get(hit.entry_id).passages
        if hit.score < bar or taken.isdisjoint(passages):
            continue
        leaves = [leaf for p in passages if p not in taken for leaf in leaves_of(p)]
        if not leaves:
            continue
        best = max(leaves, key=lambda leaf: scores.get(leaf.id, -float("inf")))
        out.append(Hit(best.id, scores.get(best.id, hit.score)))
        taken.update(best.passages)
    return out


class PoolRanker(SearchOne, Closing):
    """Wraps a retriever and rearranges its rankings over a full pool by :func:`arrange`.

    Args:
        base: the retriever over ``pool``.
        pool: the pool it ranks.
        rule: the ranking rule; its ``pool_depth`` is the number of entries taken from ``base`` per query (at
            least 4x the ``k`` asked for), so that dropped and deferred entries leave enough to fill ``k``.
    """

    def __init__(self, base: Retriever, pool: Pool, rule: PoolRule | None = None) -> None:
        self.rule = (rule or PoolRule()).validate()
        self.base, self.pool, self.depth = base, pool, self.rule.pool_depth
        self.name = base.name
        # a retriever that knows each passage's leaves (ppr) spares the first lift a read of every leaf's passages
        self.leaves_of: Callable[[str], Sequence[Node]] | None = getattr(base, "passage_leaves", None)

    def owned(self) -> Sequence[Retriever]:
        return (self.base,)

    def __getattr__(self, name: str) -> Any:  # fallbacks, linking details... of the wrapped retriever
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        depth = max(self.depth, 4 * k)
        return [arrange(hits, self.pool, self.rule, self.leaves_of)[:k]
                for hits in self.base.search_many(queries, depth)]


def has_non_leaves(pool: Pool) -> bool:
    """True when the pool holds summaries, aggregates or propositions besides leaves."""
    return any(kind != "leaf" for kind in pool.kinds)


#: the fields of :class:`~sirerag.core.config.retrieval.PoolRule` a report shows
DESCRIBED = ("pool_rule", "leaf_share", "lift_ratio")


def describe(retriever: Retriever) -> dict[str, Any]:
    """What ranked the results, for reports: ``{"retriever", "pool_rule", "leaf_share", "lift_ratio"}``;
    ``pool_rule`` is ``passages`` when the rule of this module rearranged the ranking (with its ``leaf_share``
    and ``lift_ratio``), else ``native`` (asked for, or a pool of leaves only, where the rule changes nothing)
    and the others None."""
    if isinstance(retriever, PoolRanker):
        values = {name: getattr(retriever.rule, name) for name in DESCRIBED}
        return {"retriever": retriever.name, **{k: float(v) if isinstance(v, int) else v for k, v in values.items()}}
    return {"retriever": getattr(retriever, "name", "?"), "pool_rule": "native",
            **{name: None for name in DESCRIBED[1:]}}
