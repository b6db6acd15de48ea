"""LLM extraction: retries, failure records, the rewrite drift guard; and the real SmolLM2 path.

The scripted backend below stands in for a model (it answers from a table, and its
answers include real SmolLM2 outputs from tests/data); what is tested is the
extraction code around it. The slow tests run the real ``hf:smollm2``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import pytest

from sirerag.text.chunking import chunk_documents
from sirerag.core.config import ChunkingConfig, ExtractionConfig
from sirerag.extraction import extract, extract_facts
from sirerag.extraction.coref import clean_rewrite, drift_reason, rewrite_chunks
from sirerag.extraction.llm import RETRY_VERSION
from sirerag.core.io import read_jsonl
from sirerag.llm.base import Completion, LLMCallError, LLMRequest
from sirerag.core.types import Document

DATA = Path(__file__).parent / "data"
GOOD = json.dumps({"f1": {"fact": "Ada Lovelace was born in London.", "entities": ["Ada Lovelace", "London"]},
                   "f2": {"fact": "Ada Lovelace wrote notes.", "entities": ["Ada Lovelace", "Atlantis"]}})


def smollm2_echo() -> str:
    """A real SmolLM2-135M answer that copies the prompt's worked example."""
    for line in (DATA / "smollm2_extraction_outputs.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("case") == "echoes_example":
            return row["output"]
    raise AssertionError("fixture has no echoes_example case")


class ScriptedLLM:
    """Answers each request with ``answer(request, attempt_index)``; records every request."""

    spec = "scripted:test"

    def __init__(self, answer: Callable[[LLMRequest], str | LLMCallError | Completion]) -> None:
        self.answer = answer
        self.requests: list[LLMRequest] = []

    def complete(self, request: LLMRequest) -> Completion:
        out = self.complete_many([request], return_exceptions=True)[0]
        if isinstance(out, LLMCallError):
            raise out
        return out

    def complete_many(self, requests: Sequence[LLMRequest], *, return_exceptions: bool = False):  # noqa: ANN201
        out = []
        for request in requests:
            self.requests.append(request)
            got = self.answer(request)
            if isinstance(got, str):
                got = Completion(text=got, prompt_tokens=10, completion_tokens=len(got.split()), finish_reason="stop")
            out.append(got)
        return out


def paragraph_of(request: LLMRequest) -> str:
    return request.messages[0][1].rsplit("Paragraph:", 1)[-1]


def test_retry_is_a_different_request_and_recovers() -> None:
    llm = ScriptedLLM(lambda r: GOOD if RETRY_VERSION in r.prompt_version else smollm2_echo())
    [outcome] = extract_facts(["Ada Lovelace was born in London and wrote notes."], llm, show_progress=False)
    assert outcome.error is None and outcome.attempts == 2
    assert [f.text for f in outcome.facts] == ["Ada Lovelace was born in London.", "Ada Lovelace wrote notes."]
    assert outcome.facts[1].entities == ("Ada Lovelace",)  # "Atlantis" is not in the paragraph
    assert outcome.ungrounded == 1
    first, second = llm.requests
    assert second.prompt_version != first.prompt_version
    assert second.messages[:len(first.messages)] == first.messages
    assert second.messages[-2] == ("assistant", smollm2_echo())
    assert "example" in second.messages[-1][1]


def test_unparseable_after_all_attempts_is_recorded_with_raw_outputs() -> None:
    llm = ScriptedLLM(lambda r: "Sorry, I can't do that.")
    [outcome] = extract_facts(["Some paragraph."], llm, max_attempts=3, show_progress=False)
    assert outcome.facts == () and outcome.attempts == 3
    assert outcome.error == "no JSON object or array in the output"
    assert outcome.raw == ("Sorry, I can't do that.",) * 3


def test_failed_call_is_not_retried() -> None:
    llm = ScriptedLLM(lambda r: LLMCallError("HTTP 400"))
    [outcome] = extract_facts(["x"], llm, max_attempts=3, show_progress=False)
    assert outcome.error.startswith("llm call failed") and len(llm.requests) == 1


def test_truncated_answer_keeps_complete_facts() -> None:
    cut = GOOD[:GOOD.index("wrote")]
    llm = ScriptedLLM(lambda r: Completion(text="```json\n" + cut, prompt_tokens=5, completion_tokens=9,
                                           finish_reason="length"))
    [outcome] = extract_facts(["Ada Lovelace was born in London."], llm, show_progress=False)
    assert outcome.truncated and [f.text for f in outcome.facts] == ["Ada Lovelace was born in London."]


@pytest.mark.parametrize("rewrite, ok", [
    ("Ada Lovelace was born in London. Ada Lovelace wrote notes on the engine.", True),
    ("", False),
    ("Margaret Lowe later said the Harwick Bridge was the project Margaret Lowe was proudest of.", False),
    ("She was born in London. She wrote notes on the engine. " * 3, False),
    ("Ada Lovelace was born.", False),
])
def test_drift_guard(rewrite: str, ok: bool) -> None:
    original = "She was born in London. She wrote notes on the engine."
    context = "Ada Lovelace was a mathematician."
    assert (drift_reason(original, rewrite, context) is None) == ok


def test_clean_rewrite() -> None:
    assert clean_rewrite("Output: \"Ada Lovelace wrote notes.\"") == "Ada Lovelace wrote notes."
    assert clean_rewrite("```\nAda wrote.\n```") == "Ada wrote."


def test_rewrite_uses_previous_chunk_and_falls_back() -> None:
    docs = [Document(id="d", title="Ada Lovelace", text="Ada Lovelace was born in London. She wrote notes.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="tokens", max_tokens=8))
    assert len(chunks) >= 2

    def answer(request: LLMRequest) -> str:
        paragraph = request.messages[0][1].rsplit("Paragraph:\n", 1)[1].split("\n\nOutput:")[0]
        return paragraph.replace("She", "Ada Lovelace") if "She" in paragraph else "Something else entirely."

    llm = ScriptedLLM(answer)
    out = rewrite_chunks(chunks, docs, llm, show_progress=False)
    assert 'first paragraph of the document "Ada Lovelace"' in llm.requests[0].messages[0][1]
    assert chunks[0].text in llm.requests[1].messages[0][1]  # the previous chunk is the context
    assert not out[0].accepted and out[0].text == chunks[0].text and "original words" in out[0].reason
    assert out[-1].accepted and out[-1].text.startswith("Ada Lovelace wrote")


def test_llm_mode_writes_records_and_counts_failures(tmp_path) -> None:  # noqa: ANN001
    docs = [Document(id="a", title="Ada Lovelace", text="Ada Lovelace was born in London."),
            Document(id="b", title="Nothing", text="It was a quiet day.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))

    def answer(request: LLMRequest) -> str:
        text = request.messages[0][1]
        if request.prompt_version.startswith("coref_rewrite"):
            return paragraph_of(request).split("Output:")[0].strip()
        return GOOD if "born in London" in text.rsplit("Paragraph:", 1)[1] else "no idea"

    result = extract(chunks, docs, config=ExtractionConfig(extractor="llm"), llm=ScriptedLLM(answer),
                     out=tmp_path, show_progress=False)
    assert result.spec == "llm:scripted:test"
    assert [p.text for p in result.propositions] == ["Ada Lovelace was born in London.", "Ada Lovelace wrote notes."]
    assert result.stats["failed_chunks"] == 1 and result.stats["retried_chunks"] == 1
    failures = list(read_jsonl(tmp_path / "extraction_failures.jsonl"))
    assert [(f["chunk_id"], f["stage"], f["raw"]) for f in failures] == [(chunks[1].id, "extract", ["no idea"] * 2)]
    rewrites = list(read_jsonl(tmp_path / "rewrites.jsonl"))
    assert [r["chunk_id"] for r in rewrites] == [c.id for c in chunks]
    assert all(r["original"] == c.text for r, c in zip(rewrites, chunks))


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):  # noqa: ANN001, ANN201
    from sirerag.core.config import LLMConfig
    from sirerag.llm.factory import load_llm

    return load_llm("hf:smollm2", config=LLMConfig(), cache_dir=tmp_path_factory.mktemp("llm-cache"))


@pytest.mark.slow
def test_real_smollm2_extraction_never_crashes(smollm2, tmp_path) -> None:  # noqa: ANN001
    docs = [Document(id="a", title="Diana Luna", text="Luna was born in Rome, Italy and turned professional in "
                                                     "2001. She won her first event in 2004."),
            Document(id="b", title="Emperor Daigo", text="Daigo's reign spanned the years from 897 through 930.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    config = ExtractionConfig(extractor="llm", rewrite_max_tokens=64, extract_max_tokens=96)
    result = extract(chunks, docs, config=config, llm=smollm2, out=tmp_path, show_progress=False)
    assert result.spec == "llm:hf:smollm2"
    failed = {f["chunk_id"] for f in result.failures if f["stage"] == "extract"}
    produced = {p.chunk_id for p in result.propositions}
    assert failed | produced == {c.id for c in chunks} and not failed & produced
    assert all(f["raw"] for f in result.failures if f["stage"] == "extract")
    assert len(list(read_jsonl(tmp_path / "rewrites.jsonl"))) == len(chunks)
    assert result.stats["failed_chunks"] == len(failed)
