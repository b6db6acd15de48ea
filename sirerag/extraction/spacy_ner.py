"""Entities from a spaCy pipeline (``extraction.ner = "spacy:MODEL"``), optional.

``MODEL`` is an installed spaCy package name (``en_core_web_sm``) or a pipeline
folder written by ``nlp.to_disk``; nothing is downloaded. Entities are the
pipeline's ``doc.ents`` except bare numbers (``CARDINAL``, ``ORDINAL``), plus any
hint (the document title) found verbatim. Needs ``pip install 'sirerag[spacy]'``.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Sequence

from sirerag.core.errors import ConfigError, require
from sirerag.extraction.normalize import normalize_entities

#: labels that are plain numbers, not names
SKIPPED_LABELS = frozenset({"CARDINAL", "ORDINAL"})


@functools.lru_cache(maxsize=4)
def _load(model: str) -> Any:
    spacy = require("spacy", "spacy", purpose="extraction.ner = 'spacy:MODEL'")
    try:
        return spacy.load(model)
    except OSError as exc:
        raise ConfigError(f"extraction.ner: spaCy pipeline {model!r} is not installed or not a pipeline "
                          f"folder ({exc}); install the model package or give a folder written by nlp.to_disk")


def spacy_tagger(model: str) -> Callable[[str, Sequence[str]], tuple[str, ...]]:
    """A ``(sentence, hints) -> entities`` function backed by the spaCy pipeline ``model``.

    Raises:
        MissingExtraError: spaCy is not installed.
        ConfigError: the pipeline cannot be loaded.
    """
    nlp = _load(model)

    def tag(sentence: str, hints: Sequence[str] = ()) -> tuple[str, ...]:
        doc = nlp(sentence)
        spans = [(ent.start_char, ent.text) for ent in doc.ents if ent.label_ not in SKIPPED_LABELS]
        for hint in hints:
            if hint:
                spans += [(m.start(), hint) for m in re.finditer(rf"(?<!\w){re.escape(hint)}(?!\w)", sentence)]
        spans.sort(key=lambda s: s[0])
        return normalize_entities(text for _, text in spans)

    return tag
