"""The offline extractor's coreference rules: a sentence that opens with a pronoun gets the name it stands for.

Deliberately conservative; a sentence is changed only where one antecedent is plain:

* ``He``/``She``/``His``/``Her`` (or ``..., he/she`` after a short opening phrase) become the document's
  subject (``X``, ``X's``) when that subject is person-like (the title, or the name opening the first
  sentence) and the sentence before names no other person-like name;
* ``It``/``Its`` become the non-person name the sentence before opens with ("The Knife is a 1961 Dutch
  film ... It was entered into ..."), with its article ("The 2002 Independent Spirit Awards"), unless the
  ``It`` stands for nothing ("It is said that", "It was not until", "It rains"); a name that is the person
  the document is about is not one;
* ``The <kind>`` ("The film", "The band") becomes the document's own non-person subject when the sentence
  before opens with it and ``<kind>`` is what the document is (a word of its title's qualifier or of its
  first sentence's definition: "is a 1961 Dutch film").
"""
from __future__ import annotations

import re
from typing import Sequence

# a subject pronoun opening the sentence, or right after a short opening phrase ("In 2017, she ...")
_PRONOUN = re.compile(r"^(?:(He|She|His|Her)|([A-Z][^,;.]{1,40}, )(he|she))\b(?!')")
_QUALIFIER = re.compile(r"\s*\(([^)]*)\)\s*$")
_NAME_WORD = re.compile(r"^[A-Z][\w'.-]*$")
# "It" / "Its" opening a sentence, and "The <noun>" ("The film", "The band")
_IT = re.compile(r"^(It|Its)\b(?!')")
_THE_NOUN = re.compile(r"^The ([a-z]+)\b")
# an "It" that stands for no antecedent: "It is believed that", "It was not until", "It takes two hours to",
# "It rains"
_EXPLETIVE = re.compile(r"^It (?:is|was|has been|had been|would be|will be|seems|seemed|appears|appeared|"
                        r"remains|remained|takes|took|follows|followed|turned out|became)"
                        r"(?: \w+){0,2} (?:that|to|for|whether|how|why|when|until|if)\b"
                        r"|^It (?:rains|rained|snows|snowed|is raining|was raining|is snowing|was snowing)\b")
# what a first sentence says a document is: "X is a 1961 Dutch film ..."
_DEFINITION = re.compile(r"\b(?:is|was|are|were) (?:an?|the)\b([^.;]{0,80})\b")  # ends on a word's end

# last words that mark a name as a thing, place or organisation, not a person
_NON_PERSON_HEADS = frozenset("""
engine award awards prize university college school church river lake mountain mountains park company
corporation records league club team party council museum station bridge street road tour festival series
film album band county district province state city island islands ocean sea war army navy force forces
game games olympics cup championship house hall hotel theatre theater institute society association academy
foundation group order empire kingdom republic dynasty hospital airport line railway center centre square
tower castle palace cathedral abbey act treaty court office department ministry committee commission senate
parliament congress agency bank network channel magazine newspaper times post press studio studios pictures
films productions entertainment music show novel book song opera symphony valley bay coast desert forest
""".split())
_PERSON_QUALIFIERS = frozenset(("", "actor", "actress", "singer", "musician", "writer", "politician", "footballer",
                                "author", "director", "poet", "artist", "painter", "composer", "athlete"))


def title_hint(title: str) -> str:
    """The title without a trailing ``(qualifier)``: ``"Queen of Katwe (film)"`` → ``"Queen of Katwe"``."""
    return _QUALIFIER.sub("", title).strip()


def person_like(name: str, title: str) -> bool:
    """Could ``name`` be a person: two to five capitalised words, no digits, not ending in a
    word such as "Engine" or "University", and a title without a non-person qualifier such
    as ``(film)``."""
    qualifier = _QUALIFIER.search(title)
    if qualifier and qualifier.group(1).lower() not in _PERSON_QUALIFIERS:
        return False
    words = name.split()
    if not words or words[-1].casefold() in _NON_PERSON_HEADS:
        return False
    return 2 <= len(words) <= 5 and all(_NAME_WORD.match(w) or w.lower() in ("de", "van", "von", "da")
                                        for w in words) and not any(ch.isdigit() for ch in name)


def same_person(name: str, subject: str) -> bool:
    """``Jennifer Anne Ehle`` and ``Jennifer Ehle``: same first and last word, or one a prefix
    of the other."""
    a, b = name.casefold().split(), subject.casefold().split()
    return (a[0] == b[0] and a[-1] == b[-1]) or a == b[:len(a)] or b == a[:len(b)]


def substitute_person(sentence: str, subject: str, previous: Sequence[str]) -> str:
    """``He``/``She``/``His``/``Her`` opening ``sentence`` replaced by the person ``subject`` unless the sentence
    before, whose entities are ``previous``, names another person-like name."""
    match = _PRONOUN.match(sentence)
    if not match:
        return sentence
    if any(len(e.split()) >= 2 and person_like(e, e) and not same_person(e, subject) for e in previous):
        return sentence  # another person-like name could be the antecedent: leave it
    if match.group(1):
        replacement = subject if match.group(1) in ("He", "She") else f"{subject}'s"
        return replacement + sentence[match.end():]
    return match.group(2) + subject + sentence[match.end():]


def kind_words(first: str, title: str) -> frozenset[str]:
    """What a document is: the words of its title's qualifier ("film" of "The Knife (1961 film)") and the
    lower-case words of its first sentence's definition ("The Knife is a 1961 Dutch film")."""
    words: set[str] = set()
    qualifier = _QUALIFIER.search(title or "")
    if qualifier:
        words.update(re.findall(r"[a-z]+", qualifier.group(1).lower()))
    definition = _DEFINITION.search(first)
    if definition:
        words.update(re.findall(r"\b[a-z]+\b", definition.group(1)))
    return frozenset(words)


def opening_name(sentence: str, entities: Sequence[str], thing: str | None,
                 person: str | None) -> tuple[str, str] | None:
    """``(text, name)``: the non-person name ``sentence`` opens with (its first entity, with or without
    "The") and the text it opens with ("The 2002 Independent Spirit Awards"); None when the sentence
    opens with no entity, or with a person: a person-like name, or a word of the document's ``person``.
    ``thing``, the document's own non-person subject, always counts."""
    if not entities:
        return None
    name = entities[0]
    for text in (name, f"The {name}"):
        if not sentence.startswith(text):
            continue
        if name == thing:
            return text, name
        if person and (same_person(name, person) or name.casefold() in person.casefold().split()):
            return None
        if name.startswith("The ") or not person_like(name, name):
            return text, name
    return None


def substitute_thing(sentence: str, antecedent: str, kinds: frozenset[str]) -> str:
    """``It``/``Its`` opening ``sentence`` replaced by ``antecedent`` (the text the sentence before opens
    with) unless the ``It`` is an expletive; ``The <kind>`` replaced when ``kind`` is in ``kinds`` (given
    only when the antecedent is the document's own subject)."""
    match = _IT.match(sentence)
    if match:
        if _EXPLETIVE.match(sentence):
            return sentence
        return (antecedent if match.group(1) == "It" else f"{antecedent}'s") + sentence[match.end():]
    match = _THE_NOUN.match(sentence)
    if match and match.group(1) in kinds and not antecedent.casefold().startswith(match.group(0).casefold()):
        return antecedent + sentence[match.end():]
    return sentence


__all__ = ["kind_words", "opening_name", "person_like", "same_person", "substitute_person",
           "substitute_thing", "title_hint"]
