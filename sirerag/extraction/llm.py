"""Proposition + entity extraction through the LLM (paper Figure 7), with bounded retries.

:func:`extract_facts` sends one request per paragraph, parses each answer with
:func:`~sirerag.extraction.parse.parse_facts` and cleans the facts:

* facts copied from the prompt's worked example are dropped (small models echo it),
  and so are facts fewer than 30% of whose longer words occur in the source;
* entities that are a determiner plus lower-case words ("the film") are dropped, and so
  are entities none of whose words occur in the paragraph, its context or its title
  (``ground_entities``), so invented names never link propositions.

A paragraph whose answer yields no facts is asked again, up to ``max_attempts``
requests in all. Greedy decoding would repeat the same answer, so a retry is a
*different* request: the first answer is shown back to the model with the reason it
could not be used and a stricter instruction (``extract_retry@1``, its own cache
key). A paragraph still without facts is reported as failed with every raw answer.

These functions are public so the fine-tuning tools can produce teacher data
and evaluate a student with exactly the build's parsing and checks.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Sequence

from sirerag.extraction.parse import Fact, ParsedFacts, ParseError, parse_facts
from sirerag.llm.progress import run_requests
from sirerag.llm.base import LLM, LLMCallError, LLMRequest
from sirerag.llm.prompts import EXTRACT_PROPOSITIONS

logger = logging.getLogger(__name__)

#: version of the retry turn; part of the request, so of the cache key
RETRY_VERSION = "extract_retry@2"
RETRY_INSTRUCTION = (
    "Your answer could not be used: {reason}. Answer again with only a JSON object of the form "
    "{{\"f1\": {{\"fact\": \"...\", \"entities\": [\"...\"]}}, \"f2\": ...}}: facts stated in the paragraph "
    "below (not in the example), short, at most {max_facts} facts, double quotes, no text outside the JSON.\n\n"
    "Paragraph: {paragraph}\nOutput:\n"
)
_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_ECHO_CHARS = 1500
# a determiner followed only by lower-case words: a common noun phrase, not a name
_COMMON_NOUN = re.compile(r"^(?:[Tt]he|[Aa]n?|[Tt]his|[Tt]hat|[Tt]hese|[Tt]hose|[Ii]ts|[Hh]is|[Hh]er|[Tt]heir)\s+[^A-Z0-9]*$")


def _example_facts() -> frozenset[str]:
    """Fact texts of the prompt's worked example (and its schema placeholder)."""
    template = EXTRACT_PROPOSITIONS.user
    facts = set(re.findall(r'"fact": "([^"]+)"', template.replace("{{", "{").replace("}}", "}")))
    return frozenset(f.casefold() for f in facts)


_EXAMPLE_FACTS = _example_facts()


@dataclass(frozen=True)
class FactOutcome:
    """The result for one paragraph.

    Attributes:
        facts: validated, cleaned facts (empty when ``error`` is set).
        error: why no facts could be read after all attempts (None on success).
        attempts: how many requests were sent.
        raw: the raw model answer of every attempt.
        truncated: the accepted answer was cut off; its complete facts were kept.
        echoed: facts dropped because they copy the prompt's example or are not grounded
            in the source (fewer than 30% of their longer words occur in it).
        ungrounded: entities dropped because none of their words occur in the source.
        repairs: JSON repairs needed for the accepted answer.
    """

    facts: tuple[Fact, ...] = ()
    error: str | None = None
    attempts: int = 0
    raw: tuple[str, ...] = ()
    truncated: bool = False
    echoed: int = 0
    ungrounded: int = 0
    repairs: tuple[str, ...] = field(default_factory=tuple)


def extraction_request(paragraph: str, *, max_tokens: int = 1024) -> LLMRequest:
    """The first-attempt request for one paragraph (the Figure 7 prompt)."""
    return EXTRACT_PROPOSITIONS.request(max_tokens=max_tokens, paragraph=paragraph)


def retry_request(first: LLMRequest, answer: str, reason: str, paragraph: str, *, max_facts: int = 12) -> LLMRequest:
    """A stricter follow-up: the earlier answer as an assistant turn, then the reason, the rules
    and the paragraph again (small models attend to what comes last)."""
    shown = answer if len(answer) <= _MAX_ECHO_CHARS else answer[:_MAX_ECHO_CHARS] + " ..."
    instruction = RETRY_INSTRUCTION.format(reason=reason, max_facts=max_facts, paragraph=paragraph)
    messages = first.messages + (("assistant", shown or "(no answer)"), ("user", instruction))
    return LLMRequest(messages=messages, max_tokens=first.max_tokens, temperature=first.temperature,
                      json_mode=first.json_mode, prompt_version=f"{first.prompt_version}+{RETRY_VERSION}")


def clean_facts(facts: Sequence[Fact], source: str, *, ground_entities: bool = True) -> tuple[list[Fact], int, int]:
    """Drop facts copied from the prompt's example and, with ``ground_entities``, facts
    whose words mostly do not occur in ``source`` and entities none of whose words do.

    Returns:
        ``(facts, n_dropped_facts, n_ungrounded_entities)``.
    """
    vocabulary = {w.casefold() for w in _WORD.findall(source)}
    kept: list[Fact] = []
    echoed = ungrounded = 0
    for fact in facts:
        if fact.text.casefold() in _EXAMPLE_FACTS or (ground_entities and not _grounded(fact.text, vocabulary)):
            echoed += 1
            continue
        entities = tuple(e for e in fact.entities if not _COMMON_NOUN.match(e))  # "the film", "a company"
        if ground_entities:
            grounded = tuple(e for e in entities if any(w.casefold() in vocabulary for w in _WORD.findall(e)))
            ungrounded += len(entities) - len(grounded)
            entities = grounded
        kept.append(Fact(text=fact.text, entities=entities))
    return kept, echoed, ungrounded


def _grounded(text: str, vocabulary: set[str]) -> bool:
    """At least 30% of a fact's longer words (4+ characters; all its words if it has none
    that long) occur in the source."""
    words = [w.casefold() for w in _WORD.findall(text)]
    words = [w for w in words if len(w) >= 4] or words
    return bool(words) and sum(w in vocabulary for w in words) >= 0.3 * len(words)


def read_facts(output: str, source: str, *, ground_entities: bool = True) -> tuple[ParsedFacts, list[Fact], int, int]:
    """Parse one model answer and keep the facts grounded in ``source`` (:func:`clean_facts`).

    Returns:
        ``(parsed, facts, n_dropped_facts, n_ungrounded_entities)``.

    Raises:
        ParseError: the answer holds no facts, or only facts that were dropped. Nothing
            else is raised on any input string.
    """
    parsed = parse_facts(output)
    facts, echoed, ungrounded = clean_facts(parsed.facts, source, ground_entities=ground_entities)
    if parsed.facts and not facts:
        raise ParseError("the answer repeats the prompt's example or facts not in the paragraph")
    return parsed, facts, echoed, ungrounded


def extract_facts(paragraphs: Sequence[str], llm: LLM, *, sources: Sequence[str] | None = None,
                  max_tokens: int = 1024, max_attempts: int = 2, ground_entities: bool = True,
                  show_progress: bool = True) -> list[FactOutcome]:
    """Extract facts with entities from each paragraph.

    Args:
        paragraphs: the texts to extract from (rewritten chunks in a build).
        llm: any backend of the LLM protocol.
        sources: per paragraph, the text entities are grounded against (default: the
            paragraph itself; a build passes original + rewrite + context).
        max_tokens: completion budget per request.
        max_attempts: requests per paragraph at most (>= 1).
        ground_entities: drop entities none of whose words occur in the source.
        show_progress: progress bars.

    Returns:
        One :class:`FactOutcome` per paragraph, in order. Never raises on model output.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    sources = list(sources) if sources is not None else list(paragraphs)
    first = [extraction_request(p, max_tokens=max_tokens) for p in paragraphs]
    current = list(first)
    raws: list[list[str]] = [[] for _ in paragraphs]
    errors: list[str | None] = [None] * len(paragraphs)
    outcomes: list[FactOutcome | None] = [None] * len(paragraphs)
    pending = list(range(len(paragraphs)))
    for attempt in range(1, max_attempts + 1):
        if not pending:
            break
        desc = "proposition extraction" if attempt == 1 else f"proposition extraction (retry {attempt - 1})"
        results = run_requests(llm, [current[i] for i in pending], desc=desc, show_progress=show_progress)
        still: list[int] = []
        for i, result in zip(pending, results):
            if isinstance(result, LLMCallError):
                errors[i] = f"llm call failed: {result}"
                outcomes[i] = FactOutcome(error=errors[i], attempts=attempt, raw=tuple(raws[i]))
                continue  # a failed call is not a parse problem: asking differently will not help
            raws[i].append(result.text)
            try:
                parsed, facts, echoed, ungrounded = read_facts(result.text, sources[i], ground_entities=ground_entities)
            except ParseError as exc:
                errors[i] = exc.reason
                still.append(i)
                if attempt < max_attempts:
                    current[i] = retry_request(first[i], result.text, exc.reason, paragraphs[i])
                continue
            outcomes[i] = FactOutcome(facts=tuple(facts), attempts=attempt, raw=tuple(raws[i]),
                                      truncated=parsed.truncated, echoed=echoed, ungrounded=ungrounded,
                                      repairs=parsed.repairs)
        pending = still
    for i in pending:
        outcomes[i] = FactOutcome(error=errors[i] or "no facts", attempts=max_attempts, raw=tuple(raws[i]))
    return [o if o is not None else FactOutcome(error="not run") for o in outcomes]
