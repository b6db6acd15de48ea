"""Versioned prompt templates.

Each template has a ``name`` and a ``version``; ``name@version`` goes into every
cache key, so editing a prompt means bumping its version and nothing stale is
served from the cache. The wording is ours; the instructions and output formats
follow SiReRAG (Zhang et al.): the RAPTOR cluster summary, the coreference
rewrite with the previous paragraph as context (paper Figure 6), the
proposition + entity extraction as JSON (paper Figure 7) and the short-answer
QA reader.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from sirerag.llm.base import LLMRequest, Role


@dataclass(frozen=True)
class PromptTemplate:
    """A named, versioned chat prompt; :meth:`request` fills it in."""

    name: str
    version: str
    system: str
    user: str
    json_mode: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    def messages(self, **fields: str) -> tuple[tuple[Role, str], ...]:
        out: list[tuple[Role, str]] = []
        if self.system:
            out.append(("system", self.system))
        out.append(("user", self.user.format(**fields)))
        return tuple(out)

    def request(self, *, max_tokens: int, temperature: float = 0.0, **fields: str) -> LLMRequest:
        return LLMRequest(
            messages=self.messages(**fields),
            max_tokens=max_tokens,
            temperature=temperature,
            json_mode=self.json_mode,
            prompt_version=self.key,
        )


SUMMARY = PromptTemplate(
    name="cluster_summary",
    version="1",
    system="You are a careful assistant that writes faithful summaries.",
    user=(
        "Write a summary of the following text, keeping as many of its key details "
        "(names, dates, numbers, relations) as are needed:\n\n{context}"
    ),
)

_COREF_EXAMPLE_PREVIOUS = (
    "The Harwick Bridge crosses the River Tame at Elmford. It was designed by the engineer "
    "Margaret Lowe and opened to traffic in 1931, replacing a ferry that had run since the 1700s."
)
_COREF_EXAMPLE_PARAGRAPH = (
    "She later said it was the project she was proudest of. The council closed it for repairs in 1987, "
    "and its reopening drew a crowd of several thousand. Today it carries a cycle lane."
)
_COREF_EXAMPLE_OUTPUT = (
    "Margaret Lowe later said the Harwick Bridge was the project Margaret Lowe was proudest of. "
    "The Elmford council closed the Harwick Bridge for repairs in 1987, and the reopening of the "
    "Harwick Bridge drew a crowd of several thousand. Today the Harwick Bridge carries a cycle lane."
)
_COREF_RULES = (
    "Rewrite the paragraph below so that every entity reference is resolved, using the preceding "
    "paragraph of the same document for context.\n"
    "- Replace every pronoun that points to another sentence with the name it refers to.\n"
    "- Every pronoun left in a sentence must refer to a named entity in that same sentence.\n"
    "- Name entities explicitly wherever a sentence would otherwise be ambiguous; each sentence must "
    "be clear on its own.\n"
    "- Use one name per entity: its most informative one.\n"
    "- Output the rewritten paragraph and nothing else."
)

COREF_REWRITE = PromptTemplate(
    name="coref_rewrite",
    version="1",
    system="",
    user=(
        "Previous paragraph of the document:\n" + _COREF_EXAMPLE_PREVIOUS + "\n\n"
        "Instructions:\n" + _COREF_RULES + "\n\n"
        "Paragraph:\n" + _COREF_EXAMPLE_PARAGRAPH + "\n\n"
        "Output:\n" + _COREF_EXAMPLE_OUTPUT + "\n\n"
        "Previous paragraph of the document:\n{previous}\n\n"
        "Instructions:\n" + _COREF_RULES + "\n\n"
        "Paragraph:\n{paragraph}\n\n"
        "Output:\n"
    ),
)

_EXTRACT_EXAMPLE_PARAGRAPH = (
    "The Okavango Delta Research Station was founded in 1994 by the ecologist Peter Mbeki with funding "
    "from the University of Botswana. The station tracks elephant migration between Botswana and Namibia, "
    "and in 2019 its team published the first census of the delta's wild dog population."
)
_EXTRACT_EXAMPLE_OUTPUT = """```json
{
  "f1": {"fact": "The Okavango Delta Research Station was founded in 1994 by Peter Mbeki.",
         "entities": ["Okavango Delta Research Station", "Peter Mbeki", "1994"]},
  "f2": {"fact": "Peter Mbeki is an ecologist.", "entities": ["Peter Mbeki"]},
  "f3": {"fact": "The University of Botswana funded the founding of the Okavango Delta Research Station.",
         "entities": ["University of Botswana", "Okavango Delta Research Station"]},
  "f4": {"fact": "The Okavango Delta Research Station tracks elephant migration between Botswana and Namibia.",
         "entities": ["Okavango Delta Research Station", "Botswana", "Namibia"]},
  "f5": {"fact": "In 2019 the Okavango Delta Research Station published the first census of the wild dog population of the Okavango Delta.",
         "entities": ["Okavango Delta Research Station", "Okavango Delta", "2019"]}
}
```"""

EXTRACT_PROPOSITIONS = PromptTemplate(
    name="extract_propositions",
    version="1",
    system="",
    user=(
        "List every fact stated in the paragraph. For each fact, also list the named entities it mentions.\n\n"
        "Instructions:\n"
        "- Give each named entity only its most informative name (if \"J. Smith\", \"Smith\" and "
        "\"John Smith\" are the same person, write \"John Smith\"), and use that name in every fact.\n"
        "- A fact must not contain pronouns or vague references: name the entities directly.\n"
        "- A fact with no named entity gets an empty entity list; do not use common nouns as entities.\n"
        "- Answer with a JSON object of this shape:\n"
        '{{"f1": {{"fact": "a factual statement of important information from the paragraph", '
        '"entities": ["entity 1", "entity 2"]}}, "f2": {{...}}}}\n\n'
        "Example.\nParagraph: " + _EXTRACT_EXAMPLE_PARAGRAPH.replace("{", "{{").replace("}", "}}") + "\n"
        "Output:\n" + _EXTRACT_EXAMPLE_OUTPUT.replace("{", "{{").replace("}", "}}") + "\n\n"
        "Put the JSON in a code block and write nothing else.\n\n"
        "Paragraph: {paragraph}\n"
        "Output:\n"
    ),
    json_mode=False,
)

QA_READER = PromptTemplate(
    name="qa_reader",
    version="1",
    system="You answer questions using the given context.",
    user=(
        "Context:\n{context}\n\nQuestion: {question}\n"
        "Answer the question in as few words as possible."
    ),
)

ALL_TEMPLATES: Sequence[PromptTemplate] = (SUMMARY, COREF_REWRITE, EXTRACT_PROPOSITIONS, QA_READER)
