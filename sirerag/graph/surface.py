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

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from sirerag.extraction.normalize import entity_key
from sirerag.extraction.tagger import STOPLIST

#: surface forms shorter than this many alphanumeric characters are not indexed
MIN_FORM_CHARS = 3
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
        forms: the table :func:`surface_forms` gives for ``names`` (stored at build time), as pairs or as a
            mapping; computed from ``names`` when None.
    """

    def __init__(self, names: Sequence[str], *, min_chars: int = MIN_FORM_CHARS,
                 forms: Sequence[tuple[str, int]] | Mapping[str, int] | None = None) -> None:
        table = surface_forms(names, min_chars=min_chars) if forms is None else forms
        self.table: dict[str, int] = dict(table)
        self.size = len(self.table)
        self.longest = max(map(len, self.table), default=0)

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
        found = []
        for start in starts:
            for end in ends:
                if end <= start:
                    continue
                if end - start > self.longest:
                    break
                node = self.table.get(text[start:end])
                if node is None:
                    continue
                span = query[start:end]
                if not lower_query and not any(ch.isupper() or ch.isdigit() for ch in span):
                    continue
                if start == first_word and _opening_words(span):
                    continue  # "What is ..." opens a question; it names nothing
                found.append(Match(start, end, int(node), span))
        found.sort(key=lambda m: (-(m.end - m.start), m.start))
        taken: list[Match] = []
        for m in found:
            if all(m.end <= t.start or m.start >= t.end for t in taken):
                taken.append(m)
        return sorted(taken, key=lambda m: m.start)


def covered(query: str, text: str, matches: Sequence[Match]) -> bool:
    """True when an occurrence of ``text`` in ``query`` (case-folded) lies on (overlaps) one of ``matches``:
    a tagged entity inside a matched name is not linked again, wherever else the same words appear."""
    folded, name = query.casefold(), text.casefold()
    at = folded.find(name)
    while at >= 0:
        if any(at < m.end and m.start < at + len(text) for m in matches):
            return True
        at = folded.find(name, at + 1)
    return False
