"""Recognition memory (HippoRAG 2, section 3.4): an LLM keeps only the retrieved facts
that are relevant to the query, before they seed Personalized PageRank.

The candidate facts are shown numbered; the model answers ``{"relevant": [numbers]}``.
An answer that cannot be parsed leaves the candidates unfiltered (and is counted),
so a weak model degrades to plain query-to-fact linking instead of failing a search.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Any, Sequence

from sirerag.llm.base import LLM, LLMCallError
from sirerag.llm.prompts import PromptTemplate

logger = logging.getLogger(__name__)

FACT_FILTER = PromptTemplate(
    name="fact_filter",
    version="1",
    system="You select the facts that help answer a question.",
    user=(
        "A question may need several facts chained together (multi-hop reasoning). From the numbered "
        "candidate facts below, choose at most 4 that are directly useful for answering the question "
        "or for finding an entity the question is about. Use only the given numbers.\n"
        'Answer with a JSON object like {{"relevant": [1, 3]}}; answer {{"relevant": []}} if none is useful.\n\n'
        "Example.\nQuestion: Who directed the film in which Dana Velez starred in 1998?\n"
        "Facts:\n1. Dana Velez starred in the 1998 film Harbor Lights.\n"
        "2. Harbor Lights was directed by Tomas Ruiz.\n3. Dana Velez was born in Lisbon.\n"
        'Output: {{"relevant": [1, 2]}}\n\n'
        "Question: {question}\nFacts:\n{facts}\nOutput:"
    ),
    json_mode=True,
)

_NUMBERS = re.compile(r"\{.*\}", re.DOTALL)


def parse_selection(text: str, n: int) -> list[int] | None:
    """Zero-based indices chosen in a model answer, or None when it cannot be parsed."""
    match = _NUMBERS.search(text)
    if not match:
        return None
    try:
        obj = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    values = obj.get("relevant") if isinstance(obj, dict) else None
    if not isinstance(values, list):
        return None
    chosen: list[int] = []
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= n and v - 1 not in chosen:
            chosen.append(v - 1)
    return chosen


class RecognitionFilter:
    """Filters candidate facts with an LLM (any object implementing the LLM protocol).

    Args:
        llm: the model.
        max_tokens: completion budget of one answer.
    """

    def __init__(self, llm: LLM, *, max_tokens: int = 64) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.unparsed = 0
        self.failed = 0

    def filter_many(self, questions: Sequence[str], candidates: Sequence[Sequence[str]]) -> list[list[int]]:
        """For each question, the indices of its candidate facts judged relevant (in order)."""
        todo = [i for i, facts in enumerate(candidates) if facts]
        requests = [FACT_FILTER.request(max_tokens=self.max_tokens, question=questions[i],
                                        facts="\n".join(f"{j + 1}. {f}" for j, f in enumerate(candidates[i])))
                    for i in todo]
        answers = self.llm.complete_many(requests, return_exceptions=True) if requests else []
        out: list[list[int]] = [[] for _ in candidates]
        for i, answer in zip(todo, answers):
            n = len(candidates[i])
            if isinstance(answer, LLMCallError):
                self.failed += 1
                logger.warning("fact filter call failed (%s); keeping the %d candidate facts", answer, n)
                out[i] = list(range(n))
                continue
            chosen = parse_selection(answer.text, n)
            if chosen is None:
                self.unparsed += 1
                logger.debug("fact filter answer not parsed; keeping the candidates: %r", answer.text[:200])
                chosen = list(range(n))
            out[i] = sorted(chosen)
        return out
