"""Hop-by-hop bridging: what is left of a question after each hop (``bridge_chain``).

A question of three or four hops names one entity and a chain of relations: "Who is the spouse of the director
of *Sleep, My Love*?" is "*Sleep, My Love*", then "director", then "spouse". Bridging scores the first hop's
propositions by the whole question; with ``bridge_chain`` each further hop is scored by what is *left* of it:
its content words (lower-cased, English stopwords and "did"/"does" removed) without those of the linked names
and without those the propositions followed so far matched. After "Sleep, My Love was directed by Douglas
Sirk", "directed" has used "director", and the hop from Douglas Sirk is scored by "spouse". When nothing is
left, the chain stops there.

Two words match when their *keys* are equal: the word without a plural "s", cut to its first
:data:`KEY_LENGTH` characters ("directed" and "director" are "direc"). Each bridged entity carries what is left
along the propositions that reached it, so two branches of one question may ask for different words.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import numpy as np

#: characters of a word that make its key
KEY_LENGTH = 5
#: words of a question that never name a relation, besides the English stopwords
QUESTION_WORDS = frozenset({"did", "does"})


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from sirerag.pool.bm25 import english_stopwords

    return english_stopwords() | QUESTION_WORDS


def content_words(text: str) -> list[str]:
    """The lower-cased alphanumeric words of ``text`` that are no stopword, in order."""
    from sirerag.pool.bm25 import tokenize

    return tokenize(text, _stopwords())


def key(word: str) -> str:
    """The key two matching words share (a lower-cased word): without a plural "s", at most
    :data:`KEY_LENGTH` characters."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:KEY_LENGTH]


def keys(text: str) -> frozenset[str]:
    """The keys of the content words of ``text``."""
    return frozenset(key(w) for w in content_words(text))


@dataclass(frozen=True)
class Rest:
    """What is left of a question: its content words, and the keys used so far (the linked names' and those
    the propositions followed matched)."""

    words: tuple[str, ...]
    used: frozenset[str] = frozenset()

    @classmethod
    def of(cls, question: str, names: Iterable[str] = ()) -> "Rest":
        """The rest of ``question`` once the words of its linked ``names`` are used."""
        return cls(tuple(content_words(question)), frozenset().union(*(keys(n) for n in names)))

    @property
    def left(self) -> tuple[str, ...]:
        """The words not used yet, in the question's order."""
        return tuple(w for w in self.words if key(w) not in self.used)

    @property
    def text(self) -> str:
        """The words left, joined: what a further hop is scored by ("" when nothing is left)."""
        return " ".join(self.left)

    def after(self, text: str) -> "Rest":
        """This rest once a proposition ``text`` has been followed: the question's words it matches are used."""
        return Rest(self.words, self.used | (keys(text) & {key(w) for w in self.words}))

    def matches(self, text: str) -> bool:
        """Whether ``text`` shares a word (by key) with what is left."""
        return not keys(text).isdisjoint(key(w) for w in self.left)


@dataclass(frozen=True)
class Chain:
    """Hop-by-hop bridging of one question: what is left of it after its linked names, and the query encoder
    that embeds a rest (``encode``: texts -> L2-normalised rows, the index's query side).

    ``words``: a further hop follows only a proposition that shares a word with what is left (by key);
    without it any proposition at or above the threshold is followed while a word is left."""

    rest: Rest
    encode: Callable[[list[str]], np.ndarray]
    words: bool = True

    def vectors(self, rests: Sequence[Rest]) -> dict[str, np.ndarray]:
        """The vector of each distinct non-empty rest text, embedded in one batch."""
        texts = list(dict.fromkeys(r.text for r in rests if r.text))
        if not texts:
            return {}
        rows = np.asarray(self.encode(texts), dtype=np.float32)
        return dict(zip(texts, rows))


__all__ = ["Chain", "KEY_LENGTH", "QUESTION_WORDS", "Rest", "content_words", "key", "keys"]
