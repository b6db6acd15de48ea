"""A rule-based named-entity tagger for encyclopaedic English text.

No model, no download: regular expressions and capitalisation, tuned on
Wikipedia-style sentences (the MuSiQue / 2Wiki / HotpotQA passages). In order:

1. *quoted titles*: ``"A Date with Judy"``, ````This Is Me''`` (1-10 words, the first
   capitalised, most of them capitalised when longer than three);
2. *quantities*: money (``$580,000``, ``£2.2 billion``), percentages and numbers with a
   unit (``4.5 km``, ``1,200 metres``);
3. *dates*: ``November 5, 1975``, ``5 November 1975``, ``June 1994``, seasons ``2011–12``,
   ``604 BC``; then bare years ``1975`` and decades ``1970s`` (``1762–1827`` is two years);
4. *title-case spans*: runs of capitalised words joined by connectors (``of``, ``the``,
   ``de``, ``von``...) only between two capitalised words; ``'s`` ends a run and is
   stripped; a year right after "the"/"a" and before a span of two or more words belongs
   to it (``the 1988 Summer Olympics``); an inner ``The``/``A`` starts a new title; a short
   number right after the span is kept (``Sonnet 110``);
5. *hints*: known names (the document title without its ``(film)`` qualifier) found
   verbatim replace the spans they cover, never a longer span.

The first word of a sentence is a name only if it is not a common word: a
stoplist of function words, adverbs and verbs that start sentences, and, once
:meth:`EntityTagger.fit` has seen the corpus, any word the corpus mostly writes in
lower case. Measured precision/recall on hand-annotated benchmark sentences is in
``docs/relatedness.md`` (fixture ``tests/data/tagger_gold.jsonl``).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from sirerag.extraction.normalize import is_entity, normalize_entities
from sirerag.core.types import NAME_ABBREVIATIONS

_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan\\.|Feb\\.|Mar\\.|Apr\\.|Jun\\.|Jul\\.|Aug\\.|Sep\\.|Sept\\.|Oct\\.|Nov\\.|Dec\\.")
_YEAR = r"(?:1[0-9]{3}|20[0-9]{2})"
_DASH = r"\s?(?:--|[-\u2013\u2014/])\s?"
_DATE = re.compile(
    rf"(?<![\w$£€¥.,])(?:(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+{_YEAR}"   # November 5, 1975
    rf"|\d{{1,2}}\s+(?:{_MONTHS})\s+{_YEAR}"                                    # 5 November 1975
    rf"|(?:{_MONTHS})\s+{_YEAR}"                                                # June 1994
    rf"|{_YEAR}{_DASH}(?:{_YEAR}|\d{{2}}(?!\s+(?:{_MONTHS})))"                  # 2011–12, 1445– 1455
    rf"|\d{{1,4}}\s?(?:BC|BCE|AD|CE)(?![\w])"                                   # 604 BC
    rf"|{_YEAR}s|{_YEAR})(?![\w,.]?\d)"
)
_RANGE = re.compile(rf"^({_YEAR}){_DASH}({_YEAR})$")
_UNITS = ("km|kilometres|kilometers|kilometre|kilometer|m|metres|meters|metre|meter|cm|mm|mi|miles|mile|ft|feet|"
          "foot|inches|inch|kg|kilograms|grams|lb|lbs|tonnes|tons|ha|hectares|acres|sq mi|km2|km²|"
          "°C|°F|percent|per cent|%|mph|km/h|MW|GW|kW")
_MONEY = re.compile(r"(?:US)?[$£€¥]\s?\d[\d,]*(?:\.\d+)?(?:\s(?:million|billion|trillion))?")
_QUANTITY = re.compile(rf"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:{_UNITS})(?![\w])")
_QUOTED = (re.compile(r"(?=``\s?([^`\n]{1,80}?)\s?'')"), re.compile(r'(?="\s?([^"\n]{1,80}?)\s?")'),
           re.compile("(?=\u201c([^\u201d\\n]{1,80}?)\u201d)"))
_ABBREVIATIONS = "|".join(sorted(NAME_ABBREVIATIONS, key=len, reverse=True))
_TOKEN = re.compile(rf"(?:[^\W\d_]\.){{2,}}|(?:{_ABBREVIATIONS})\.|[A-Z]\.(?=\s[A-Z])"
                    r"|[^\W\d_](?:[\w'\u2019&.-]*\w)?|\d+|&")
_SUFFIX = re.compile(r",?\s(?:Jr|Sr|Inc|Ltd|Co|Corp|Bros)\.|,\s(?:II|III|IV)\b")
_ABBREVIATION_ONLY = re.compile(rf"^(?:{_ABBREVIATIONS})\.$")

#: words joined inside a name only between two capitalised words
CONNECTORS = frozenset({"of", "the", "de", "del", "della", "der", "den", "des", "di", "da", "do", "dos", "du",
                        "la", "le", "les", "van", "von", "y", "e", "i", "al", "el", "bin", "ibn", "for", "&",
                        "upon", "zu", "af", "ye"})
#: further words allowed inside a title-like run (one that starts with a capitalised "The"/"A"
#: in mid-sentence): "The Man in the High Castle", "The Wit and Legend of ..."
TITLE_CONNECTORS = frozenset({"in", "on", "at", "to", "with", "a", "an", "and", "from", "is", "my", "into"})
#: capitalised words that start sentences but are not names (compared in lower case)
STOPLIST = frozenset("""
a an the this that these those there here it its it's he she his her hers him they their them we our you your i
in on at by for from with without within into onto of to as after before during since until while when where
whereas which who whom whose what why how if although though despite because however therefore thus also
furthermore moreover meanwhile nevertheless nonetheless besides instead later earlier then today currently
now once some many most several both each every all another other such only other no not one two three
four five six seven eight nine ten first second third last next previously originally initially eventually
finally subsequently additionally consequently accordingly specifically notably generally typically usually
unlike like following according among between under over above below along around near through throughout
upon about against toward towards beyond born located situated known called named based built founded
released published produced directed written starring featuring despite including is was are were be been
has have had do does did can could will would may might shall should must yes oh well so and or but nor yet
either neither just even still again perhaps together alongside across behind beside outside inside up down
off out more less much few any what's its
""".split())
_DETERMINER_BEFORE = re.compile(r"\b(?:the|The|a|an|his|her|its|their)\s$")
_COMMON_INITIAL_MIN = 3  # lower-case count that marks a sentence-initial word as common after fit()


@dataclass(frozen=True)
class Span:
    """An entity mention: ``text`` at ``start:end`` of the input, and its ``kind``
    (``hint``, ``title``, ``date``, ``quantity``, ``name``)."""

    text: str
    start: int
    end: int
    kind: str


@dataclass
class EntityTagger:
    """The rule-based tagger; :meth:`tag` returns entity strings, :meth:`spans` the mentions.

    Args:
        lowercase_counts: how often each word was seen in lower case inside sentences
            (filled by :meth:`fit`); a sentence-initial capitalised word seen at least
            3 times in lower case and more often lower-cased than capitalised is
            treated as a common word.
    """

    lowercase_counts: Counter = field(default_factory=Counter)
    capitalised_counts: Counter = field(default_factory=Counter)

    def fit(self, texts: Iterable[str]) -> "EntityTagger":
        """Count lower-case and capitalised uses of each word (outside sentence starts)."""
        for text in texts:
            for m in re.finditer(r"(?<=[a-z,;] )([A-Za-z][a-z]+)\b", text):
                word = m.group(1)
                if word[0].islower():
                    self.lowercase_counts[word] += 1
                else:
                    self.capitalised_counts[word.lower()] += 1
        return self

    def to_counts(self) -> dict[str, dict[str, int]]:
        """The fitted state as JSON-ready data (what :meth:`from_counts` reads)."""
        return {"lowercase": dict(self.lowercase_counts), "capitalised": dict(self.capitalised_counts)}

    @classmethod
    def from_counts(cls, counts: dict[str, dict[str, int]]) -> "EntityTagger":
        """A tagger fitted as the one whose :meth:`to_counts` gave ``counts``."""
        return cls(lowercase_counts=Counter(counts["lowercase"]), capitalised_counts=Counter(counts["capitalised"]))

    def is_common(self, word: str) -> bool:
        """Is this capitalised word a common word (stoplist, or mostly lower case in the corpus)?"""
        low = word.lower()
        if low in STOPLIST:
            return True
        n_low = self.lowercase_counts.get(low, 0)
        return n_low >= _COMMON_INITIAL_MIN and n_low > self.capitalised_counts.get(low, 0)

    def tag(self, text: str, *, hints: Sequence[str] = ()) -> tuple[str, ...]:
        """Entities of ``text`` (normalised, de-duplicated, in order of first mention)."""
        return normalize_entities(s.text for s in self.spans(text, hints=hints))

    def spans(self, text: str, *, hints: Sequence[str] = ()) -> list[Span]:
        """Entity mentions in ``text`` in order; ``hints`` are names known to be entities."""
        taken = [False] * len(text)
        found: list[Span] = []

        def take(start: int, end: int, kind: str, value: str | None = None) -> None:
            if any(taken[start:end]):
                return
            for k in range(start, end):
                taken[k] = True
            found.append(Span(value if value is not None else text[start:end], start, end, kind))

        for pattern in _QUOTED:
            for m in pattern.finditer(text):
                inner = m.group(1).strip()
                words = inner.split()
                if 1 <= len(words) <= 10 and words[0][:1].isupper() and _title_like(words):
                    start = m.start(1) + (len(m.group(1)) - len(m.group(1).lstrip()))
                    take(start, start + len(inner), "title", inner)
        for m in _MONEY.finditer(text):
            take(m.start(), m.end(), "quantity")
        for m in _QUANTITY.finditer(text):
            take(m.start(), m.end(), "quantity")
        for m in _DATE.finditer(text):
            self._take_date(m, take)
        years = {s.end: s for s in found if s.kind == "date" and s.text.isdigit()}
        for start, end, n_words in self._name_runs(text, taken):
            year = years.get(start - 1)
            if year is not None and n_words >= 2 and text[start - 1] == " " \
                    and _DETERMINER_BEFORE.search(text, 0, year.start):
                found.remove(year)  # "1988 Summer Olympics": the year is part of the name
                for k in range(year.start, year.end):
                    taken[k] = False
                start = year.start
            take(start, end, "name")
        # "3 D": a lone letter is not a name, nor a lone "Inc." or "St."
        found = [s for s in found if len(s.text.strip()) > 1 and not _ABBREVIATION_ONLY.match(s.text)]
        for hint in sorted({h for h in hints if h and is_entity(h)}, key=len, reverse=True):
            for m in re.finditer(rf"(?<!\w){re.escape(hint)}(?!\w)", text):
                # a known name wins over the spans it covers ("Great Adventure" inside
                # "The Great Adventure"), never over a longer one ("Vàm Cỏ" in "Vàm Cỏ River")
                inside = [s for s in found if m.start() <= s.start and s.end <= m.end()]
                if any(s.end > m.start() and s.start < m.end() for s in found if s not in inside):
                    continue
                for s in inside:
                    found.remove(s)
                found.append(Span(m.group(0), m.start(), m.end(), "hint"))
        found.sort(key=lambda s: s.start)
        return found

    @staticmethod
    def _take_date(m: re.Match, take) -> None:  # noqa: ANN001
        value = m.group(0)
        pair = _RANGE.match(value)
        if pair:  # "1273-1453" is two years, "2011-12" one season
            first, second = pair.group(1), pair.group(2)
            take(m.start(), m.start() + 4, "date", first)
            take(m.end() - len(second), m.end(), "date", second)
            return
        take(m.start(), m.end(), "date")

    def _name_runs(self, text: str, taken: list[bool]) -> list[tuple[int, int, int]]:
        """``(start, end, n_capitalised_words)`` of each run of capitalised words."""
        tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)]
        tokens = [t for t in tokens if not any(taken[t[0]:t[1]])]
        runs: list[tuple[int, int, int]] = []
        i, n = 0, len(tokens)
        while i < n:
            if not self._capitalised(text, tokens, i):
                i += 1
                continue
            titled = tokens[i][2] in ("The", "A", "An")
            j, k, words = i, i + 1, 1  # j: the last capitalised token of the run
            while k < n and _adjacent(text, tokens[k - 1], tokens[k]):
                word = tokens[k][2]
                if _possessive(tokens[k - 1][2]) and k - 1 == j:
                    break  # "Istanbul's Taksim Square": two names
                if self._capitalised(text, tokens, k) or word == "I":
                    if word in ("The", "A", "An"):
                        break  # "... Series The Man in the High Castle": a new title starts
                    j, k, words = k, k + 1, words + 1
                elif (word in CONNECTORS or (titled and word in TITLE_CONNECTORS)) and k + 1 < n \
                        and _adjacent(text, tokens[k], tokens[k + 1]):
                    k += 1
                else:
                    break
            end = tokens[j][1]
            nxt = tokens[j + 1] if j + 1 < n else None
            if nxt is not None and nxt[2].isdigit() and len(nxt[2]) <= 3 and _adjacent(text, tokens[j], nxt) \
                    and not (nxt[1] < len(text) and text[nxt[1]] in ",:"):
                end, j = nxt[1], j + 1  # "Sonnet 110", "Apollo 11"
            if _possessive(text[tokens[i][0]:end]):
                end -= 2
            else:
                suffix = _SUFFIX.match(text, end)
                if suffix:  # "George Pack, Jr."
                    end = suffix.end()
                    while j + 1 < n and tokens[j + 1][1] <= end:
                        j += 1
            runs.append((tokens[i][0], end, words))
            i = j + 1
        return runs

    def _capitalised(self, text: str, tokens: list[tuple[int, int, str]], i: int) -> bool:
        start, _end, word = tokens[i]
        if not word[:1].isupper() or word == "I" or word in CONNECTORS:
            return False
        bare = word.rstrip(".").replace("\u2019", "'")
        if bare.endswith("'s"):
            bare = bare[:-2]
        if _sentence_initial(text, start) and self.is_common(bare):
            return False
        if bare.lower() in ("i", "he", "she", "it", "we", "they", "you"):
            return False
        return True


def _possessive(word: str) -> bool:
    return word.endswith(("'s", "\u2019s"))


def _title_like(words: list[str]) -> bool:
    """A quoted span is a title if short, or if most of its non-connector words are capitalised
    (so a quoted sentence fragment such as "He became known as" is not taken)."""
    if len(words) <= 3:
        return words[0] not in ("I", "It", "He", "She", "They", "We", "You")
    content = [w for w in words if w.lower() not in CONNECTORS and w.lower() not in TITLE_CONNECTORS]
    return bool(content) and sum(w[:1].isupper() for w in content) * 2 >= len(content)


def _adjacent(text: str, left: tuple[int, int, str], right: tuple[int, int, str]) -> bool:
    """Only white space (or a hyphen with spaces, as in "Hyde - White") between two tokens."""
    gap = text[left[1]:right[0]]
    return gap in (" ", "-", " - ", "- ", " -")


def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t\"'(`\u201c")
    return not before or before[-1] in ".!?:;\n"


_DEFAULT = EntityTagger()


def tag_entities(text: str, *, hints: Sequence[str] = (), tagger: EntityTagger | None = None) -> tuple[str, ...]:
    """Entities of ``text`` with the rule-based tagger (a corpus-fitted one when given).

    Args:
        text: a sentence or short passage (also a query: H6 uses it for query NER).
        hints: names known to be entities, matched verbatim first.
        tagger: a fitted :class:`EntityTagger`; the stoplist-only default when None.
    """
    return (tagger or _DEFAULT).tag(text, hints=hints)
