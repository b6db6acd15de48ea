"""The offline extractor: sentences as propositions, a rule-based (or spaCy) tagger for entities.

A real, model-free algorithm for builds without an LLM, named ``offline:rules``
(or ``offline:spacy:MODEL``) in the index manifest:

1. each chunk is split into sentences (:func:`sirerag.text.chunking.sentence_spans`); a
   first line that repeats the document title is not a proposition;
2. *pronoun substitution*, deliberately conservative (:mod:`sirerag.extraction.substitution`):
   ``He``/``She`` (``His``/``Her``) become the document's person-like subject when the sentence
   before names no other person; ``It``/``Its`` become the non-person name the sentence before
   opens with, and ``The film`` (any word that says what the document is) the document's own
   non-person subject. Otherwise the sentence is left unchanged;
3. entities are tagged in every sentence, with the title as a hint;
4. *name completion*: a one-word name that is the first or last word of exactly one
   longer name of the same document (``Settle`` → ``Keala Joan Settle``) is replaced
   by the longer name in the entity list (the text is unchanged).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable, Sequence

from sirerag.core.config.sections import spacy_model, uses_rule_tagger
from sirerag.text.chunking import sentence_spans
from sirerag.extraction.normalize import normalize_entities
from sirerag.extraction.substitution import (kind_words, opening_name, person_like, substitute_person,
                                             substitute_thing, title_hint)
from sirerag.extraction.tagger import EntityTagger
from sirerag.core.types import Chunk, Document, Proposition, collapse_ws

logger = logging.getLogger(__name__)

#: ``(sentence, hints) -> entities``
TagFunction = Callable[[str, Sequence[str]], Sequence[str]]

class OfflineExtractor:
    """Sentence propositions with rule-based entities; see the module docstring.

    Args:
        tag: ``(sentence, hints) -> entities``; the rule-based tagger (fitted on the
            corpus by :meth:`fit`) when None.
        spec: the name recorded in the manifest.
        resolve_pronouns: apply the pronoun substitution.
    """

    def __init__(self, tag: TagFunction | None = None, *, spec: str = "offline:rules",
                 resolve_pronouns: bool = True, tagger: EntityTagger | None = None) -> None:
        self._tagger = tagger or EntityTagger()
        self._tag: TagFunction = tag or (lambda text, hints: self._tagger.tag(text, hints=hints))
        self.spec = spec
        self.resolve_pronouns = resolve_pronouns
        self.stats: dict[str, int] = {"pronouns_substituted": 0, "names_completed": 0}

    def fit(self, texts: Iterable[str]) -> "OfflineExtractor":
        """Learn which capitalised words are common words from the corpus (rule tagger only)."""
        self._tagger.fit(texts)
        return self

    def tag(self, text: str, hints: Sequence[str] = ()) -> tuple[str, ...]:
        """The entities of ``text`` (a query, for PPR's entity linking), by this extractor's tagger."""
        return tuple(self._tag(text, hints))

    def extract_document(self, document: Document, chunks: Sequence[Chunk]) -> list[Proposition]:
        """Propositions of one document's chunks (given in order)."""
        hint = title_hint(document.title) if document.title else ""
        hints = [hint] if hint else []
        rows: list[tuple[Chunk, str, tuple[str, ...]]] = []
        subject: str | None = hint if hint and person_like(hint, document.title) else None
        thing: str | None = hint if hint and subject is None else None  # a non-person document's subject
        kinds: frozenset[str] = frozenset()
        opening = None  # the non-person name the sentence before opens with
        for chunk in chunks:
            for sentence in self._sentences(chunk, document):
                entities = tuple(self._tag(sentence, hints))
                if not rows:  # the first sentence: the name it opens with, and what it says the document is
                    opener = entities[0] if entities and sentence.startswith(entities[0]) else None
                    if opener and subject is None and person_like(opener, document.title or opener):
                        subject, thing = opener, None
                    elif opener and subject is None and thing is None:
                        thing = opener
                    kinds = kind_words(sentence, document.title)
                if self.resolve_pronouns and rows:
                    replaced, named = sentence, ""  # named is set wherever replaced changes
                    if opening:
                        replaced = substitute_thing(sentence, opening[0], kinds if opening[1] == thing else frozenset())
                        named = opening[1]
                    if replaced == sentence and subject:
                        replaced, named = substitute_person(sentence, subject, rows[-1][2]), subject
                    if replaced != sentence:
                        sentence = replaced
                        entities = tuple(self._tag(sentence, hints + [named]))
                        self.stats["pronouns_substituted"] += 1
                rows.append((chunk, sentence, entities))
                opening = opening_name(sentence, entities, thing, subject)
        completed = self._complete_names(rows, hint)
        out: list[Proposition] = []
        counters: dict[str, int] = {}
        for (chunk, sentence, _), entities in zip(rows, completed):
            index = counters.get(chunk.id, 0)
            counters[chunk.id] = index + 1
            out.append(Proposition(id=Proposition.make_id(chunk.id, index, sentence), text=sentence,
                                   entities=entities, chunk_id=chunk.id, doc_id=chunk.doc_id, index=index))
        return out

    @staticmethod
    def _sentences(chunk: Chunk, document: Document) -> list[str]:
        text = chunk.text
        out = [collapse_ws(text[a:b]) for a, b in sentence_spans(text)]
        if chunk.index == 0 and out and document.title and out[0] == collapse_ws(document.title):
            out = out[1:]  # the title line of Document.content is not a proposition
        return [s for s in out if any(ch.isalnum() for ch in s)]

    def _complete_names(self, rows: list[tuple[Chunk, str, tuple[str, ...]]],
                        title: str) -> list[tuple[str, ...]]:
        """Map short and middle-name variants of a person-like name onto one name per document:
        the title when it is person-like, else the only longer name that fits."""
        canonical: dict[str, str] = {}
        long_names = {e for _, _, ents in rows for e in ents if len(e.split()) >= 2 and person_like(e, e)}
        if title and person_like(title, title):
            t_words = title.casefold().split()
            for name in long_names:  # "Keala Joan Settle" -> "Keala Settle"
                words = name.casefold().split()
                if len(words) > len(t_words) and words[0] == t_words[0] and words[-1] == t_words[-1]:
                    canonical[name.casefold()] = title
            long_names = {n for n in long_names if n.casefold() not in canonical} | {title}
        by_word: dict[str, set[str]] = {}
        for name in long_names:
            words = name.split()
            for w in (words[0], words[-1]):
                by_word.setdefault(w.casefold(), set()).add(name)
        out: list[tuple[str, ...]] = []
        for _, _, entities in rows:
            fixed = []
            for e in entities:
                key = e.casefold()
                candidates = by_word.get(key, set()) if len(e.split()) == 1 else set()
                if key in canonical:
                    fixed.append(canonical[key])
                    self.stats["names_completed"] += 1
                elif len(candidates) == 1:
                    fixed.append(next(iter(candidates)))
                    self.stats["names_completed"] += 1
                else:
                    fixed.append(e)
            out.append(normalize_entities(fixed))
        return out


def offline_extractor(ner: str, corpus: Callable[[], Iterable[str]], *,
                      counts: dict[str, dict[str, int]] | None = None) -> OfflineExtractor:
    """The offline extractor of ``extraction.ner``: the rule tagger fitted on the texts ``corpus()`` returns
    (the build's chunks: a build, an update and PPR's query tagging fit it alike), or read from ``counts``
    (:meth:`EntityTagger.to_counts` of that fit, stored with the graph), ``spacy:MODEL``, or both
    (``rules+spacy:MODEL``: the union of their entities).

    Raises:
        MissingExtraError: ``spacy:...`` without spaCy installed.
        ConfigError: the spaCy pipeline cannot be loaded.
    """
    model = spacy_model(ner)
    rules: EntityTagger | None = None
    if uses_rule_tagger(ner):
        rules = EntityTagger.from_counts(counts) if counts is not None else EntityTagger().fit(corpus())
    if model is None:
        return OfflineExtractor(tagger=rules)
    from sirerag.extraction.spacy_ner import QUANTITY_LABELS, spacy_tagger, union_tagger

    if rules is None:
        return OfflineExtractor(spacy_tagger(model), spec=f"offline:{ner}")
    tag_rules = rules.tag
    # the union takes only names from the pipeline: the rule tagger tags years and numbers of its own
    return OfflineExtractor(union_tagger(lambda text, hints: tag_rules(text, hints=hints),
                                         spacy_tagger(model, skipped=QUANTITY_LABELS, names_only=True)),
                            spec=f"offline:{ner}", tagger=rules)


def extract_offline(chunks: Sequence[Chunk], documents: Sequence[Document], extractor: OfflineExtractor, *,
                    show_progress: bool = False) -> list[Proposition]:
    """Propositions of all chunks, in document order and chunk order within a document."""
    from tqdm.auto import tqdm

    by_doc: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc_id, []).append(chunk)
    out: list[Proposition] = []
    known = {d.id for d in documents}
    for document in tqdm(documents, desc="offline extraction", unit="doc", disable=not show_progress):
        doc_chunks = sorted(by_doc.get(document.id, []), key=lambda c: c.index)
        if doc_chunks:
            out.extend(extractor.extract_document(document, doc_chunks))
    for doc_id, doc_chunks in by_doc.items():  # chunks whose document was not given
        if doc_id not in known:
            out.extend(extractor.extract_document(Document(id=doc_id, text=""), sorted(doc_chunks,
                                                                                       key=lambda c: c.index)))
    return out
