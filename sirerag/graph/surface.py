"""Surface-form index of the entity graph: longest non-overlapping name matches in a query.

Every entity node (names from the extractor and document titles alike) is indexed
under its matching key (:func:`~sirerag.extraction.normalize.entity_key`, case-folded)
and an accent-free variant of it, in a hash table. A query is case-folded the same way;
every span of it that starts and ends on a word boundary and is no longer than the
longest form is looked up, and the longest matches that do not overlap are kept
(longer first, then earlier).

The spans on word boundaries of a query are few (a few hundred for a long question), so
looking each up finds what an Aho–Corasick automaton over the forms finds, and the table
is ready as soon as the stored forms are read; an automaton (``pyahocorasick``, used
before) had to be rebuilt from the 49k forms of the 2Wiki graph at every start (about
0.2 s), since it can only be saved by pickling. A match is kept only where the query writes it with a
capital letter or a digit (unless the whole query is lower case), so that an entity
named like a common word ("Film", "Music") is not linked from the word "film". For the same
reason a match at the query's first word made only of words that start sentences without being
names (the tagger's :data:`~sirerag.extraction.tagger.STOPLIST`: "What", "What Is", "Which") is
not linked: a question's first word is capitalised whether or not it names anything.
"""
from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from sirerag.extraction.normalize import entity_key
from sirerag.extraction.tagger import STOPLIST
from sirerag.graph.surface_table import FormTable

#: surface forms shorter than this many alphanumeric characters are not indexed
MIN_FORM_CHARS = 3
#: tagged entities up to this many characters are looked for at each position near a match (:func:`uncovered`)
SHORT_ENTITY = 64
_WORD = re.compile(r"[\w']+")


def _opening_words(span: str) -> bool:
    """True for a span of words that open sentences without naming anything ("What", "What Is"); a name
    of several such words after an article ("The Who") is still a name."""
    words = _WORD.findall(span.casefold())
    return all(w in STOPLIST for w in words) and not (len(words) > 1 and words[0] in ("the", "a", "an"))


def fold(text: str) -> str:
    """Case-folded, accent-free form of ``text`` with the same length as ``text.casefold()``
    where possible (combining marks are dropped after NFKD)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@dataclass(frozen=True)
class Match:
    """One surface match: the query span ``[start, end)`` and the entity node it names."""

    start: int
    end: int
    node: int
    text: str


def surface_forms(names: Sequence[str], *, min_chars: int = MIN_FORM_CHARS) -> list[tuple[str, int]]:
    """``(form, node)`` for every indexed surface form of ``names`` (position ``i`` is node ``i``): the
    matching key of each name and its accent-free variant, skipping forms with fewer than ``min_chars``
    alphanumeric characters; the first node of a form wins (entity keys are unique, variants may collide).
    The build stores this table (:mod:`sirerag.graph.query_aids`), so a search does not recompute it."""
    table: list[tuple[str, int]] = []
    seen: set[str] = set()
    for node, name in enumerate(names):
        for form in SurfaceIndex.forms(name):
            if form in seen or sum(ch.isalnum() for ch in form) < min_chars:
                continue
            seen.add(form)
            table.append((form, node))
    return table


class SurfaceIndex:
    """Surface forms to entity nodes, and their matches in a query.

    Args:
        names: entity display names; position ``i`` is node ``i``.
        min_chars: forms with fewer alphanumeric characters are skipped.
        forms: the table :func:`surface_forms` gives for ``names`` (stored at build time), as pairs, as a
            mapping or as a memory-mapped :class:`~sirerag.graph.surface_table.FormTable`; computed from
            ``names`` when None.
    """

    def __init__(self, names: Sequence[str], *, min_chars: int = MIN_FORM_CHARS,
                 forms: Sequence[tuple[str, int]] | Mapping[str, int] | FormTable | None = None) -> None:
        self.table: dict[str, int] | FormTable
        if isinstance(forms, FormTable):
            self.table, self.longest = forms, forms.longest
        else:
            self.table = dict(surface_forms(names, min_chars=min_chars) if forms is None else forms)
            self.longest = max(map(len, self.table), default=0)
        self.size = len(self.table)

    def _nodes(self, forms: Sequence[str]) -> list[int | None]:
        table = self.table
        return table.get_many(forms) if isinstance(table, FormTable) else [table.get(form) for form in forms]

    @staticmethod
    def forms(name: str) -> Iterable[str]:
        """The matching key of ``name`` and its accent-free variant."""
        key = entity_key(name)
        yield key
        folded = fold(key)
        if folded != key:
            yield folded

    def match(self, query: str) -> list[Match]:
        """Longest non-overlapping matches of indexed forms in ``query``, in query order."""
        if not self.size:
            return []
        text = fold(query)
        if len(text) != len(query):  # a character changed length when folded: match on the plain casefold
            text = query.casefold()
            if len(text) != len(query):
                text = query.lower()
        lower_query = not any(ch.isupper() for ch in query)
        first_word = next((i for i, ch in enumerate(query) if ch.isalnum()), -1)
        starts = [i for i in range(len(text)) if i == 0 or not text[i - 1].isalnum()]
        ends = [i for i in range(1, len(text) + 1) if i == len(text) or not text[i].isalnum()]
        spans = []
        for start in starts:  # the ends after it, up to the longest form: work linear in the query's length
            for j in range(bisect.bisect_right(ends, start), len(ends)):
                if ends[j] - start > self.longest:
                    break
                spans.append((start, ends[j]))
        found = []
        for (start, end), node in zip(spans, self._nodes([text[a:b] for a, b in spans])):
            if node is None:
                continue
            span = query[start:end]
            if not lower_query and not any(ch.isupper() or ch.isdigit() for ch in span):
                continue
            if start == first_word and _opening_words(span):
                continue  # "What is ..." opens a question; it names nothing
            found.append(Match(start, end, int(node), span))
        found.sort(key=lambda m: (-(m.end - m.start), m.start))
        taken, used = [], bytearray(len(text))  # a match's span is at most ``longest`` characters to test
        for m in found:
            if not any(used[m.start:m.end]):
                taken.append(m)
                used[m.start:m.end] = b"\x01" * (m.end - m.start)
        return sorted(taken, key=lambda m: m.start)


def covered(query: str, text: str, matches: Sequence[Match]) -> bool:
    """True when an occurrence of ``text`` in ``query`` (case-folded) lies on (overlaps) one of ``matches``:
    a tagged entity inside a matched name is not linked again, wherever else the same words appear."""
    return not uncovered(query, [text], matches)


def uncovered(query: str, entities: Sequence[str], matches: Sequence[Match]) -> list[str]:
    """``entities`` (in order) of which no occurrence in ``query`` (case-folded) overlaps one of ``matches``:
    :func:`covered` for each, in one pass over the query. The positions within reach of a match are looked up
    once for every length of entity up to :data:`SHORT_ENTITY` characters (work linear in the query's length,
    whatever the number of entities); a longer entity, which fills as much of the query, is searched for."""
    if not matches or not entities:
        return list(entities)
    folded = query.casefold()
    short: dict[str, dict[int, dict[str, list[int]]]] = {}  # first character -> len(name) -> name -> len(text)s
    hit: set[str] = set()
    starts = [m.start for m in matches]
    for text in dict.fromkeys(entities):
        name = text.casefold()
        if len(name) > SHORT_ENTITY and _overlaps(folded, name, len(text), matches, starts):
            hit.add(name)
        elif name:
            short.setdefault(name[0], {}).setdefault(len(name), {}).setdefault(name, []).append(len(text))
    reach = max([max(len(name), *widths) for sizes in short.values() for names in sizes.values()
                 for name, widths in names.items()] + [1])
    marked = bytearray(len(folded) + reach)
    for m in matches:
        marked[m.start:m.end] = b"\x01" * (m.end - m.start)
    on_match = list(itertools.accumulate(marked, initial=0))  # prefix counts of the positions a match covers
    for at, first in enumerate(folded):
        sizes = short.get(first)
        if sizes is None or on_match[at + reach] == on_match[at]:
            continue  # no entity starts with this character, or no match lies within reach
        for size, names in sizes.items():
            for width in names.get(folded[at:at + size], ()):
                if on_match[at + width] > on_match[at]:
                    hit.add(folded[at:at + size])
    return [text for text in entities if text.casefold() not in hit]


def _overlaps(folded: str, name: str, width: int, matches: Sequence[Match], starts: list[int]) -> bool:
    """Whether an occurrence of ``name`` in ``folded`` (``width`` characters long) overlaps one of ``matches``
    (sorted by start, not overlapping; ``starts`` their starts)."""
    at = folded.find(name)
    while at >= 0:
        i = bisect.bisect_left(starts, at + width)  # matches starting before the occurrence ends
        if i and matches[i - 1].end > at:
            return True
        at = folded.find(name, at + 1)
    return False
