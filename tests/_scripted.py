"""A scripted stand-in model for builds with an LLM: four short documents and the answers a chat-completions
server gives for them (``FlakyServer(reply=scripted_reply)`` in tests/_llm_server.py).

A rewrite gets the paragraph back, an extraction fixed facts whose entities the documents share, a summary the
first sentence of the text to summarise; any other prompt fails the test.
"""
from __future__ import annotations

import json

from sirerag.core.types import Document

SCRIPTED_DOCS = [
    Document(id="a", title="Diana Luna", text="Diana Luna was born in Rome, Italy. She turned professional "
                                              "in 2001 and won the Tenerife Ladies Open in 2004."),
    Document(id="b", title="Tenerife Ladies Open", text="The Tenerife Ladies Open was a golf tournament "
                                                         "on the Ladies European Tour held in Tenerife."),
    Document(id="c", title="Rome", text="Rome is the capital city of Italy."),
    Document(id="d", title="Tenerife", text="Tenerife is the largest of the Canary Islands of Spain."),
]

SCRIPTED_FACTS = {
    "turned professional": [("Diana Luna was born in Rome.", ["Diana Luna", "Rome"]),
                            ("Diana Luna won the Tenerife Ladies Open in 2004.",
                             ["Diana Luna", "Tenerife Ladies Open"])],
    "golf tournament": [("The Tenerife Ladies Open was a golf tournament held in Tenerife.",
                         ["Tenerife Ladies Open", "Tenerife"])],
    "capital city": [("Rome is the capital city of Italy.", ["Rome", "Italy"])],
    "Canary Islands": [("Tenerife is the largest of the Canary Islands.", ["Tenerife", "Canary Islands"])],
}

#: The words that tell the three kinds of prompt apart (the key of :func:`prompt_kind`).
KINDS = {"Rewrite the paragraph": "rewrite", "List every fact": "extract", "Write a summary": "summary"}


def prompt_kind(body: dict) -> str:
    """``rewrite``, ``extract``, ``summary`` or ``probe`` (the endpoint check's 1-token request): what a request
    body asks for."""
    message = body["messages"][-1]["content"]
    if message == "ping" and body.get("max_tokens") == 1:
        return "probe"
    kind = next((k for words, k in KINDS.items() if words in message), None)
    if kind is None:
        raise AssertionError(f"unexpected prompt: {message[:200]}")
    return kind


def scripted_reply(body: dict) -> str:
    """The scripted model's answer to one chat-completions request body."""
    message = body["messages"][-1]["content"]
    kind = prompt_kind(body)
    if kind == "probe":
        return "pong"
    if kind == "rewrite":
        return message.rsplit("Paragraph:\n", 1)[1].rsplit("\n\nOutput:", 1)[0]
    if kind == "extract":
        paragraph = message.rsplit("Paragraph: ", 1)[1]
        facts = next(f for phrase, f in SCRIPTED_FACTS.items() if phrase in paragraph)
        return json.dumps({f"f{i}": {"fact": t, "entities": e} for i, (t, e) in enumerate(facts, 1)})
    return message.rsplit("\n\n", 1)[1].split(". ")[0] + "."
