"""Entity normalisation: one display form and one matching key per entity name.

The paper groups propositions by *exact* entity match. Exact match on raw model
output splits one entity over trivial variants ("Paris", "Paris.", ``"Paris"``,
"paris"), so before matching we

* collapse white space and normalise typographic quotes and dashes,
* strip surrounding punctuation and quotes (keeping the final dot of an
  abbreviation such as "U.S." or "Jr."),
* compare case-folded (:func:`entity_key`), while keeping a display form.

Nothing else is merged: "The Beatles" and "Beatles" stay two entities, as in the
paper (entity resolution beyond this is the extractor's job; the LLM prompt asks
for the most informative name).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from sirerag.core.types import NAME_ABBREVIATIONS, collapse_ws

_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'",
                         "\u00ab": '"', "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u00a0": " "})
# characters stripped from both ends of a name
_EDGE = "\"'`*_#,;:!?<>|/\\ \t\n-"
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"))
_ABBREVIATION_END = re.compile(rf"(?:\b[A-Za-z]\.)+$|\b(?:{'|'.join(NAME_ABBREVIATIONS)})\.$")
# an entity that is only a pronoun or a placeholder is not an entity
_NOT_ENTITIES = frozenset({
    "", "he", "she", "it", "they", "him", "her", "them", "his", "hers", "its", "their", "theirs",
    "i", "we", "you", "me", "us", "this", "that", "these", "those", "who", "which", "someone",
    "none", "null", "n/a", "na", "unknown", "entity", "entity 1", "entity 2", "entity 3", "...",
})


def normalize_entity(name: str) -> str:
    """The display form of an entity name: NFC, white space collapsed, typographic quotes
    made plain, surrounding punctuation stripped (an abbreviation keeps its final dot).

    Returns ``""`` for a name that is empty after cleaning.
    """
    text = collapse_ws(unicodedata.normalize("NFC", str(name)).translate(_QUOTES))
    previous = None
    while text != previous:
        previous = text
        text = text.strip(_EDGE)
        if text.endswith(".") and not _ABBREVIATION_END.search(text):
            text = text[:-1]
        for left, right in _PAIRS:
            if text.startswith(left) and text.endswith(right) and text.count(left) == 1 == text.count(right):
                text = text[1:-1]  # "(Paris)"
            elif text.endswith(right) and text.count(right) > text.count(left):
                text = text[:-1]  # "Paris)"
            elif text.startswith(left) and text.count(left) > text.count(right):
                text = text[1:]  # "(Paris"
    return text


def entity_key(name: str) -> str:
    """The matching key of an entity: its display form case-folded."""
    return normalize_entity(name).casefold()


def is_entity(name: str) -> bool:
    """False for names that are empty after normalisation, pronouns, placeholders or pure
    punctuation; True otherwise."""
    key = entity_key(name)
    return bool(key) and key not in _NOT_ENTITIES and any(ch.isalnum() for ch in key)


def normalize_entities(names: Iterable[str]) -> tuple[str, ...]:
    """Display forms of ``names`` that are entities, de-duplicated by key, first form kept,
    in order of first appearance."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or not is_entity(name):
            continue
        display = normalize_entity(name)
        key = display.casefold()
        if key not in seen:
            seen.add(key)
            out.append(display)
    return tuple(out)
