"""Bounded staleness for incremental updates (see :mod:`sirerag.trees.incremental`).

A changed cluster keeps its summary text while the tokens added to or dropped from its members'
texts since that text was written (bags of token ids compared; accumulated over updates) are at
most ``threshold`` times its members' tokens, and always when its members' texts are the same;
never when the text quotes a sentence that only a dropped member held (an edited or removed
document's words stay nowhere in the pool).
The kept node gets its new children and passages, and so the content-hash id of (text, children).
LightRAG's ``force_llm_summary_on_merge`` makes the same trade for merged entity descriptions.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Protocol, Sequence

from sirerag.text.chunking import sentence_spans
from sirerag.text.tokens import get_encoding
from sirerag.core.types import Node


class StaleCounts(Protocol):
    """What :meth:`Staleness.keep` counts (an :class:`~sirerag.trees.incremental.UpdateStats`)."""

    summaries_stale: int
    summaries_same_text: int


@dataclass
class Staleness:
    """Bounded staleness of an update: ``changed`` maps a summary id to the member tokens changed
    since its text was written (read, and updated in place)."""

    threshold: float
    changed: dict[str, int]

    def keep(self, parent: Node, members: Sequence[str], by_id: dict[str, Node], old_by_id: dict[str, Node],
             tokens: dict[str, int], stats: StaleCounts) -> Node | None:
        """``parent`` with its old text over ``members`` (its new children), when that text may stay.

        Args:
            parent: the old summary node of the cluster.
            members: ids of the cluster's members now (in ``by_id``); ``parent.children`` are in ``old_by_id``.
            tokens: token count by id, for the members.
            stats: an :class:`~sirerag.trees.incremental.UpdateStats`; counts what was kept.
        """
        now = Counter(by_id[m].text for m in members)
        before = Counter(old_by_id[c].text for c in parent.children)
        if quotes_dropped(parent.text, before - now, now):
            return None  # it would keep words of an updated or removed document: written again
        added, dropped = _bag(now - before), _bag(before - now)
        changed = sum(((added - dropped) + (dropped - added)).values())
        total = self.changed.get(parent.id, 0) + changed
        if changed and total > self.threshold * sum(tokens[m] for m in members):
            return None
        children = tuple(members)
        node = replace(parent, id=Node.make_id("summary", parent.tree, parent.level, parent.text, children),
                       children=children, passages=tuple(dict.fromkeys(p for m in children for p in by_id[m].passages)))
        if total:
            self.changed[node.id] = total
        if changed:
            stats.summaries_stale += 1
        else:
            stats.summaries_same_text += 1
        return node


def _bag(texts: Counter) -> Counter:
    """The tokens of ``texts`` (text -> count) as a multiset of token ids."""
    bag: Counter = Counter()
    if texts:
        encoding = get_encoding()
        for ids, n in zip(encoding.encode_batch(list(texts), disallowed_special=()), texts.values()):
            for token, k in Counter(ids).items():
                bag[token] += k * n
    return bag


#: sentences shorter than this (characters) are too common to count as a quote
MIN_QUOTE = 12


def quotes_dropped(text: str, dropped: Counter, now: Counter) -> bool:
    """True when ``text`` quotes a sentence that only the dropped members held (an extractive summary
    keeps its members' sentences), so keeping it would leave an updated or removed document's words in
    the pool."""
    if not dropped:
        return False
    current = "\n".join(now)
    for member in dropped:
        for start, end in sentence_spans(member):
            sentence = member[start:end].strip()
            if len(sentence) >= MIN_QUOTE and sentence in text and sentence not in current:
                return True
    return False
