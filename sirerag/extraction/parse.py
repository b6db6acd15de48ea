"""Reading proposition/entity JSON out of model output, and checking its schema.

The extraction prompt (paper Figure 7) asks for ``{"f1": {"fact": ..., "entities":
[...]}, "f2": ...}`` in a code block. Models answer that, or a list of fact
objects, or ``{"facts": [...]}``, wrapped in prose, code fences, cut off by the
token limit, with trailing commas or single quotes. :func:`parse_facts` accepts
all of these and returns validated facts, or raises :class:`ParseError` with the
reason; it never raises anything else on any input string.

The failure cases seen in real SmolLM2-135M output are listed in
``docs/relatedness.md`` and kept as a test fixture
(``tests/data/smollm2_extraction_outputs.jsonl``).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from sirerag.extraction.lenient_json import JSONSyntaxError, loads_lenient
from sirerag.extraction.normalize import normalize_entities
from sirerag.core.types import collapse_ws

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_FACT_KEYS = ("fact", "proposition", "statement", "text", "claim")
_ENTITY_KEYS = ("entities", "entity", "named_entities", "named entities", "entity_list")
_LIST_KEYS = ("facts", "propositions", "statements", "output", "result", "results")
_SPLIT_ENTITIES = re.compile(r"\s*[;,]\s*")
#: at most this many JSON values are read from one output (guards pathological text)
MAX_VALUES = 32


class ParseError(ValueError):
    """Model output holds no usable facts; ``reason`` says why in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Fact:
    """One validated fact: non-empty text and its normalised entities (possibly none)."""

    text: str
    entities: tuple[str, ...]


@dataclass(frozen=True)
class ParsedFacts:
    """What :func:`parse_facts` read.

    Attributes:
        facts: the valid facts in output order (duplicates by text kept once).
        truncated: the output was cut off; only complete facts were kept.
        invalid: items that looked like facts but failed validation (no text).
        repairs: the repairs that were needed, e.g. ``code_fence``, ``prose``,
            ``trailing_comma``, ``single_quotes``, ``truncated``.
    """

    facts: tuple[Fact, ...]
    truncated: bool = False
    invalid: int = 0
    repairs: tuple[str, ...] = ()


def parse_facts(output: str) -> ParsedFacts:
    """Parse and validate the facts in one model output.

    Args:
        output: the raw completion text.

    Returns:
        :class:`ParsedFacts` with at least one fact, or none if the model answered an
        explicitly empty object/list (``{}`` or ``[]``).

    Raises:
        ParseError: no JSON value, or JSON without a single valid fact.
    """
    if not isinstance(output, str) or not output.strip():
        raise ParseError("empty output")
    repairs: set[str] = set()
    values: list[Any] = []
    truncated = False
    saw_json = False
    explicitly_empty = False
    for value, complete, value_repairs in _json_values(output, repairs):
        saw_json = True
        repairs |= value_repairs
        values.append(value)
        explicitly_empty |= complete and value in ({}, [])
        if not complete:
            truncated = True
            break
    if not saw_json:
        raise ParseError("no JSON object or array in the output")
    if truncated:  # the fact being written when the output was cut: keep it if its text is whole
        values.append(_last_partial(output, values[-1]))
    facts: list[Fact] = []
    invalid = 0
    seen: set[str] = set()
    for value in values:
        items, bad = _fact_items(value)
        invalid += bad
        for fact in items:
            if fact.text not in seen:
                seen.add(fact.text)
                facts.append(fact)
    if not facts and not explicitly_empty:
        if truncated:
            raise ParseError("output cut off before the first complete fact")
        if invalid:
            raise ParseError(f"{invalid} fact item(s) without fact text")
        raise ParseError("JSON holds no facts (expected {\"f1\": {\"fact\": ..., \"entities\": [...]}})")
    return ParsedFacts(facts=tuple(facts), truncated=truncated, invalid=invalid, repairs=tuple(sorted(repairs)))


def _json_values(output: str, repairs: set[str]) -> Iterator[tuple[Any, bool, set[str]]]:
    """JSON values in the output: inside code fences if they hold any, else anywhere (a
    lone closing fence after bare JSON is common)."""
    fences = [m for m in _FENCE.finditer(output) if _next_open(m.group(2), 0) >= 0]
    if fences:
        repairs.add("code_fence")
        blocks = [m.group(2) for m in fences]
        if output[:fences[0].start()].strip() or output[fences[-1].end():].strip():
            repairs.add("prose")
    else:
        blocks = [output.replace("```", " ")]
        if "```" in output:
            repairs.add("stray_fence")
    count = 0
    for block in blocks:
        pos = 0
        while count < MAX_VALUES:
            start = _next_open(block, pos)
            if start < 0:
                if block[pos:].strip():
                    repairs.add("prose")
                break
            if block[pos:start].strip():
                repairs.add("prose")
            got = _read_value(block, start)
            if got is None:  # a bracket that starts no value: skip it
                pos = start + 1
                continue
            value, end, complete, value_repairs = got
            count += 1
            yield value, complete, value_repairs
            if not complete:
                return
            pos = end


def _last_partial(output: str, complete_part: Any) -> Any:
    """Facts of the cut-off value read with ``keep_partial`` minus those already read whole:
    a fact whose text string was closed before the cut, with the entities read so far."""
    for block in [output.replace("```json", "").replace("```", " ")]:
        start = _next_open(block, 0)
        while start >= 0:
            try:
                got = loads_lenient(block, start, keep_partial=True)
            except (JSONSyntaxError, RecursionError):
                start = _next_open(block, start + 1)
                continue
            if not got.complete:
                whole = {f.text for f in _fact_items(complete_part)[0]}
                return [f for f in _raw_items(got.value) if _fact_text(f) not in whole]
            start = _next_open(block, got.end)
    return []


def _raw_items(value: Any) -> list[dict]:
    """Fact-like dicts of a parsed value, in order (dict form, list form, ``facts`` key)."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    if isinstance(value, dict):
        has_fact, _ = _lookup(value, _FACT_KEYS)
        if has_fact:
            return [value]
        has_list, inner = _lookup(value, _LIST_KEYS)
        if has_list:
            return _raw_items(inner)
        return [v for v in value.values() if isinstance(v, dict)]
    return []


def _fact_text(item: dict) -> str:
    _, text = _lookup(item, _FACT_KEYS)
    return collapse_ws(text) if isinstance(text, str) else ""


def _next_open(text: str, pos: int) -> int:
    brace, bracket = text.find("{", pos), text.find("[", pos)
    candidates = [p for p in (brace, bracket) if p >= 0]
    return min(candidates) if candidates else -1


def _read_value(text: str, start: int) -> tuple[Any, int, bool, set[str]] | None:
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
        return value, end, True, set()
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        got = loads_lenient(text, start)
    except (JSONSyntaxError, RecursionError):
        return None
    if not isinstance(got.value, (dict, list)):
        return None
    return got.value, got.end, got.complete, got.repairs


def _lookup(obj: dict, keys: tuple[str, ...]) -> tuple[bool, Any]:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in keys:
        if key in lowered:
            return True, lowered[key]
    return False, None


def _fact_items(value: Any, depth: int = 0) -> tuple[list[Fact], int]:
    """Facts in a parsed value (dict form, list form, ``{"facts": [...]}``, one fact)."""
    if depth > 3:
        return [], 0
    if isinstance(value, list):
        facts, bad = [], 0
        for item in value:
            if isinstance(item, str):
                fact = _make_fact(item, [])
                facts += [fact] if fact else []
                bad += 0 if fact else 1
            else:
                got, b = _fact_items(item, depth + 1)
                facts += got
                bad += b
        return facts, bad
    if not isinstance(value, dict):
        return [], 0
    has_fact, text = _lookup(value, _FACT_KEYS)
    if has_fact and not isinstance(text, (dict, list)):
        _, entities = _lookup(value, _ENTITY_KEYS)
        fact = _make_fact(text, entities)
        return ([fact], 0) if fact else ([], 1)
    has_list, inner = _lookup(value, _LIST_KEYS)
    if has_list and isinstance(inner, (list, dict)):
        return _fact_items(inner, depth + 1)
    facts, bad = [], 0
    for item in value.values():  # {"f1": {...}, "f2": {...}}
        if isinstance(item, (dict, list)):
            got, b = _fact_items(item, depth + 1)
            facts += got
            bad += b
        elif isinstance(item, str) and _looks_like_sentence(item):
            fact = _make_fact(item, [])  # {"f1": "a fact"}
            facts += [fact] if fact else []
    return facts, bad


def _looks_like_sentence(text: str) -> bool:
    return len(text.split()) >= 3


def _make_fact(text: Any, entities: Any) -> Fact | None:
    if not isinstance(text, str):
        return None
    text = collapse_ws(text)
    if not text or not any(ch.isalnum() for ch in text):
        return None
    return Fact(text=text, entities=normalize_entities(_entity_list(entities)))


def _entity_list(entities: Any) -> list[str]:
    if entities is None:
        return []
    if isinstance(entities, str):
        return [e for e in _SPLIT_ENTITIES.split(entities) if e]
    if isinstance(entities, dict):
        entities = list(entities.values())
    if not isinstance(entities, list):
        return [str(entities)] if isinstance(entities, (int, float)) and not isinstance(entities, bool) else []
    out: list[str] = []
    for item in entities:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            out.append(str(item))
        elif isinstance(item, list):
            out += [x for x in item if isinstance(x, str)]
    return out


def facts_to_json(facts: "list[Fact] | tuple[Fact, ...]") -> str:
    """The canonical answer for ``facts`` in the prompt's format, ``{"f1": {"fact": ...,
    "entities": [...]}, ...}`` (for teacher data; :func:`parse_facts` reads it back exactly)."""
    return json.dumps({f"f{i}": {"fact": f.text, "entities": list(f.entities)} for i, f in enumerate(facts, 1)},
                      ensure_ascii=False)
