"""Proposition aggregates: the propositions that share an entity, concatenated (paper 4.2).

Rules, in order:

1. propositions without entities are dropped (the paper excludes them);
2. entities are matched on :func:`~sirerag.extraction.normalize.entity_key` (white space,
   surrounding punctuation and case normalised); an aggregate shows the entity's most
   frequent display form;
3. an entity's propositions are grouped by document, documents in the order they first
   occur (corpus order for a build), propositions in their original order inside each;
   the same text is kept once;
4. with ``skip_redundant`` (the rule of the official SiReRAG code) an entity with a single
   proposition is skipped when that proposition is already part of another entity's
   aggregate of two or more propositions (the official code skips it when the
   proposition merely has another entity, which can drop a proposition from every
   aggregate; this version never does);
5. the text is the propositions joined by spaces; an aggregate over ``max_tokens`` tokens is
   split into ordered parts, each a pool entry of its own for the same entity (a single
   proposition longer than the cap is a part on its own, never truncated);
6. aggregates with identical text (e.g. two entities that only occur together) are one
   node, as in the official code; the first entity names it.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from sirerag.extraction.normalize import entity_key, normalize_entities
from sirerag.text.tokens import count_tokens, count_tokens_many
from sirerag.core.types import Node, Proposition, collapse_ws

logger = logging.getLogger(__name__)

RULE_ALL = "all-entities"
RULE_SKIP = "skip-redundant-entities"


@dataclass(frozen=True)
class EntityGroup:
    """One entity: its display form and its distinct propositions in aggregate order."""

    key: str
    display: str
    propositions: tuple[Proposition, ...]


@dataclass(frozen=True)
class AggregateResult:
    """Aggregate nodes (``kind="aggregate"``, level 0, ``tree="relatedness"``) and statistics."""

    nodes: tuple[Node, ...]
    stats: dict[str, Any] = field(default_factory=dict)


def ordered_linked(propositions: Sequence[Proposition]) -> list[Proposition]:
    """Propositions with at least one entity, grouped by document (first-seen order), input
    order inside each document; entities re-normalised."""
    rank: dict[str, int] = {}
    keep: list[tuple[int, int, Proposition]] = []
    for pos, prop in enumerate(propositions):
        entities = normalize_entities(prop.entities)
        if not entities:
            continue
        rank.setdefault(prop.doc_id, len(rank))
        if entities != prop.entities:
            prop = Proposition(id=prop.id, text=prop.text, entities=entities, chunk_id=prop.chunk_id,
                               doc_id=prop.doc_id, index=prop.index)
        keep.append((rank[prop.doc_id], pos, prop))
    keep.sort(key=lambda t: (t[0], t[1]))
    return [p for _, _, p in keep]


def group_by_entity(propositions: Sequence[Proposition]) -> list[EntityGroup]:
    """One group per entity key, in order of first mention, over entity-linked propositions."""
    linked = ordered_linked(propositions)
    members: dict[str, list[Proposition]] = {}
    seen_text: dict[str, set[str]] = {}
    forms: dict[str, Counter] = {}
    for prop in linked:
        text = collapse_ws(prop.text)
        for entity in prop.entities:
            key = entity_key(entity)
            forms.setdefault(key, Counter())[entity] += 1
            texts = seen_text.setdefault(key, set())
            if text in texts:
                continue
            texts.add(text)
            members.setdefault(key, []).append(prop)
    groups = []
    for key, props in members.items():
        counts = forms[key]
        best = max(counts.values())
        display = next(form for form in counts if counts[form] == best)  # first seen among the most frequent
        groups.append(EntityGroup(key=key, display=display, propositions=tuple(props)))
    return groups


def table3_stats(propositions: Sequence[Proposition], groups: Sequence[EntityGroup] | None = None) -> dict[str, Any]:
    """The paper's Table 3 figures that depend only on propositions: counts and propositions
    per entity (avg/max/min); ``groups`` may pass :func:`group_by_entity`'s result."""
    groups = group_by_entity(propositions) if groups is None else groups
    sizes = [len(g.propositions) for g in groups]
    linked = sum(1 for p in propositions if normalize_entities(p.entities))
    return {
        "propositions": len(propositions),
        "propositions_with_entities": linked,
        "propositions_without_entities": len(propositions) - linked,
        "entities": len(groups),
        "propositions_per_entity": {
            "avg": round(sum(sizes) / len(sizes), 2) if sizes else 0.0,
            "max": max(sizes) if sizes else 0,
            "min": min(sizes) if sizes else 0,
        },
    }


def build_aggregates(propositions: Sequence[Proposition], *, max_tokens: int = 512, skip_redundant: bool = False,
                     encoding: str = "cl100k_base") -> AggregateResult:
    """Aggregate nodes from propositions; see the module docstring for the rules.

    Args:
        propositions: in document order (as extraction returns them).
        max_tokens: cap of one aggregate's text; longer aggregates are split into parts.
        skip_redundant: apply the official code's redundant-entity rule.
        encoding: tiktoken encoding for the cap.

    Returns:
        An :class:`AggregateResult`; ``stats`` holds the Table 3 figures, the rule used
        (``all-entities`` or ``skip-redundant-entities``) and split/merge counts.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    groups = group_by_entity(propositions)
    skipped = 0
    if skip_redundant:
        covered = {p.id for g in groups if len(g.propositions) >= 2 for p in g.propositions}
        kept = [g for g in groups if not (len(g.propositions) == 1 and g.propositions[0].id in covered)]
        skipped = len(groups) - len(kept)
    else:
        kept = groups
    texts = sorted({collapse_ws(p.text) for g in kept for p in g.propositions})
    n_tokens = dict(zip(texts, count_tokens_many(texts, encoding))) if texts else {}
    nodes: dict[str, Node] = {}
    merged = split_entities = 0
    oversized: set[str] = set()
    for group in kept:
        parts = _split(group.propositions, n_tokens, max_tokens, encoding)
        split_entities += len(parts) > 1
        oversized.update(part[0].id for part in parts
                         if len(part) == 1 and n_tokens[collapse_ws(part[0].text)] > max_tokens)
        for part in parts:
            text = " ".join(collapse_ws(p.text) for p in part)
            node = Node(id=Node.make_id("aggregate", "relatedness", 0, text), text=text, kind="aggregate",
                        tree="relatedness", level=0, entity=group.display,
                        propositions=tuple(p.id for p in part),
                        passages=tuple(dict.fromkeys(p.doc_id for p in part)))
            if node.id in nodes:
                merged += 1
                old = nodes[node.id]
                nodes[node.id] = Node(id=old.id, text=old.text, kind=old.kind, tree=old.tree, level=0,
                                      entity=old.entity,
                                      propositions=tuple(dict.fromkeys(old.propositions + node.propositions)),
                                      passages=tuple(dict.fromkeys(old.passages + node.passages)))
            else:
                nodes[node.id] = node
    stats = table3_stats(propositions, groups)
    stats.update(
        aggregates=len(nodes),
        aggregation_rule=RULE_SKIP if skip_redundant else RULE_ALL,
        aggregate_max_tokens=max_tokens,
        entities_aggregated=len(kept),
        entities_skipped_redundant=skipped,
        aggregates_merged_identical=merged,
        entities_split=split_entities,
        oversized_propositions=len(oversized),
    )
    logger.info("aggregates: %d from %d entities (%s; %d split, %d identical merged)", len(nodes), len(groups),
                stats["aggregation_rule"], split_entities, merged)
    return AggregateResult(nodes=tuple(nodes.values()), stats=stats)


def _split(props: Sequence[Proposition], n_tokens: dict[str, int], max_tokens: int,
           encoding: str) -> list[list[Proposition]]:
    """Greedy ordered packing into parts of at most ``max_tokens`` tokens. The sum of the
    pieces' counts plus one per join bounds the joined count, so the exact count is only
    taken near the cap."""
    parts: list[list[Proposition]] = []
    current: list[Proposition] = []
    text, total = "", 0
    for prop in props:
        piece = collapse_ws(prop.text)
        n = n_tokens[piece]
        if current:
            joined = f"{text} {piece}"
            if total + n + 1 <= max_tokens or count_tokens(joined, encoding) <= max_tokens:
                current.append(prop)
                text, total = joined, total + n + 1
                continue
            parts.append(current)
        current, text, total = [prop], piece, n
    if current:
        parts.append(current)
    return parts
