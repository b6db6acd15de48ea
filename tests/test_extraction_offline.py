"""The offline extractor: sentences, conservative pronoun substitution, name completion."""
from __future__ import annotations

import pytest

from sirerag.text.chunking import chunk_documents
from sirerag.core.config import ChunkingConfig, ExtractionConfig
from sirerag.core.errors import ConfigError
from sirerag.extraction import extract
from sirerag.extraction.offline import OfflineExtractor, extract_offline, title_hint
from sirerag.core.types import Document


def run(*docs: Document, mode: str = "passage"):  # noqa: ANN201
    chunks = chunk_documents(list(docs), ChunkingConfig(mode=mode, max_tokens=8))
    return chunks, extract_offline(chunks, list(docs), OfflineExtractor())


def test_sentences_become_propositions_and_the_title_line_is_skipped() -> None:
    doc = Document(id="d1", title="Keala Settle", text="Keala Joan Settle is an American actress. "
                                                       "Settle originated a role on Broadway in 2013.")
    chunks, props = run(doc)
    assert [p.text for p in props] == ["Keala Joan Settle is an American actress.",
                                       "Settle originated a role on Broadway in 2013."]
    assert [p.index for p in props] == [0, 1] and {p.chunk_id for p in props} == {chunks[0].id}
    # "Keala Joan Settle" and "Settle" both become the title's name
    assert props[0].entities == ("Keala Settle", "American")
    assert props[1].entities == ("Keala Settle", "Broadway", "2013")


def test_pronoun_substitution_when_the_antecedent_is_unambiguous() -> None:
    doc = Document(id="d1", title="Ada Lovelace", text="Ada Lovelace was born in London. She worked on the "
                                                       "Analytical Engine. In 1843, she published notes. "
                                                       "Her notes include an algorithm.")
    _, props = run(doc)
    assert [p.text for p in props] == [
        "Ada Lovelace was born in London.",
        "Ada Lovelace worked on the Analytical Engine.",
        "In 1843, Ada Lovelace published notes.",
        "Ada Lovelace's notes include an algorithm.",
    ]
    assert all("Ada Lovelace" in p.entities for p in props)


def test_pronoun_is_left_alone_when_another_person_could_be_meant() -> None:
    doc = Document(id="d1", title="Ada Lovelace", text="Ada Lovelace met Charles Babbage in 1833. "
                                                       "He showed her the Difference Engine.")
    _, props = run(doc)
    assert props[1].text == "He showed her the Difference Engine."


def test_no_substitution_for_non_person_subjects() -> None:
    doc = Document(id="d1", title="Queen of Katwe (film)", text="Queen of Katwe is a 2016 film. "
                                                                "She is played by Madina Nalwanga.")
    _, props = run(doc)
    assert props[1].text.startswith("She is played")
    assert title_hint("Queen of Katwe (film)") == "Queen of Katwe"


def test_document_and_chunk_order_with_token_chunks() -> None:
    docs = [Document(id="a", title="", text="Paris is in France. Lyon is in France. Nice is in France."),
            Document(id="b", title="", text="Rome is in Italy. Milan is in Italy.")]
    chunks, props = run(*docs, mode="tokens")
    assert len(chunks) > 2
    assert [p.doc_id for p in props] == ["a", "a", "a", "b", "b"]
    assert [p.text.split()[0] for p in props] == ["Paris", "Lyon", "Nice", "Rome", "Milan"]
    order = {c.id: (c.doc_id, c.index) for c in chunks}
    keys = [(order[p.chunk_id], p.index) for p in props]
    assert keys == sorted(keys)


def test_extract_offline_result_and_stats(tmp_path) -> None:  # noqa: ANN001
    docs = [Document(id="a", title="Paris", text="Paris is the capital of France. It rains.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    result = extract(chunks, docs, config=ExtractionConfig(), llm=None, out=tmp_path, show_progress=False)
    assert result.spec == "offline:rules"
    assert result.stats["propositions"] == 2 and result.stats["without_entities"] == 1
    assert result.stats["failures"] == 0 and result.failures == []
    assert (tmp_path / "extraction_failures.jsonl").read_text() == ""


def test_llm_extractor_needs_an_llm() -> None:
    with pytest.raises(ConfigError, match="no LLM"):
        extract([], [], config=ExtractionConfig(extractor="llm"), llm=None)
