"""Propositions and entities for the relatedness tree.

Entry point: :func:`extract` (the build's extraction stage). Building blocks,
public for the graph and fine-tuning tools:

* :func:`parse_facts` / :class:`ParseError` — robust reading of model JSON output, and
  :func:`facts_to_json`, the canonical answer format (teacher data);
* :func:`extract_facts`, :func:`extraction_request`, :func:`clean_facts`, :func:`read_facts` — LLM extraction;
* :func:`rewrite_chunks`, :func:`drift_reason` — LLM coreference rewrite and its guard;
* :func:`normalize_entity`, :func:`entity_key`, :func:`normalize_entities` — entity normalisation;
* :func:`tag_entities`, :class:`EntityTagger` — the offline rule-based entity tagger;
* :class:`OfflineExtractor` — sentences as propositions, tagged entities.
"""
from __future__ import annotations

from sirerag.extraction.coref import Rewrite, drift_reason, rewrite_chunks
from sirerag.extraction.extractor import ExtractionResult, extract
from sirerag.extraction.llm import (
    FactOutcome,
    clean_facts,
    extract_facts,
    extraction_request,
    read_facts,
    retry_request,
)
from sirerag.extraction.normalize import entity_key, is_entity, normalize_entities, normalize_entity
from sirerag.extraction.offline import OfflineExtractor, extract_offline
from sirerag.extraction.parse import Fact, ParsedFacts, ParseError, facts_to_json, parse_facts
from sirerag.extraction.tagger import EntityTagger, tag_entities

__all__ = [
    "EntityTagger",
    "ExtractionResult",
    "Fact",
    "FactOutcome",
    "OfflineExtractor",
    "ParseError",
    "ParsedFacts",
    "Rewrite",
    "clean_facts",
    "drift_reason",
    "entity_key",
    "extract",
    "extract_facts",
    "extract_offline",
    "extraction_request",
    "facts_to_json",
    "is_entity",
    "normalize_entities",
    "normalize_entity",
    "parse_facts",
    "read_facts",
    "retry_request",
    "rewrite_chunks",
    "tag_entities",
]
