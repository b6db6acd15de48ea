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


def test_it_becomes_the_non_person_name_the_sentence_before_opens_with() -> None:
    doc = Document(id="d1", title="The Knife (1961 film)", text=(
        "The Knife is a 1961 Dutch film directed by Fons Rademakers. It was entered into the Berlin Film "
        "Festival. The film stars Paul Cammermans. Its music was written by Jan Smit."))
    _, props = run(doc)
    assert [p.text for p in props] == [
        "The Knife is a 1961 Dutch film directed by Fons Rademakers.",
        "The Knife was entered into the Berlin Film Festival.",
        "The Knife stars Paul Cammermans.",  # "film": what the first sentence says the document is
        "The Knife's music was written by Jan Smit.",
    ]
    assert all("The Knife" in p.entities for p in props)


def test_it_follows_the_opening_name_with_its_article_and_not_the_title() -> None:
    doc = Document(id="d1", title="18th Independent Spirit Awards", text=(
        "The 2002 Independent Spirit Awards were announced on March 22, 2003. It was hosted by John Waters."))
    _, props = run(doc)
    assert props[1].text == "The 2002 Independent Spirit Awards was hosted by John Waters."
    assert props[1].entities == ("2002 Independent Spirit Awards", "John Waters")


@pytest.mark.parametrize("text", [
    "The Knife is a 1961 film. It is said that the film was banned.",  # an expletive "It"
    "The Knife is a 1961 film. It was not until 1970 that the film was shown.",
    "The Knife is a 1961 film. It rains in its last scene.",  # the weather
    "The Knife is a 1961 film. Fons Rademakers directed the film. It won a prize.",  # a person opens the sentence
    "The Knife is a 1961 film. In 1962 the film was shown in Paris. It won a prize.",  # no name opens it
    "The Knife is a 1961 film. The band played in it.",  # "band" is not what the document is
])
def test_it_and_the_kind_are_left_alone_without_a_clear_antecedent(text: str) -> None:
    doc = Document(id="d1", title="The Knife", text=text)
    _, props = run(doc)
    assert props[-1].text == text.split(". ")[-1]


def test_a_one_word_name_of_the_person_is_not_an_antecedent_of_it_and_he_still_is_replaced() -> None:
    doc = Document(id="d1", title="Audrey Hepburn", text=(
        "Audrey Hepburn was a British actress. Hepburn starred in Roman Holiday. It won an award. "
        "Paris was her home. She lived there."))
    _, props = run(doc)
    assert props[2].text == "It won an award."
    assert props[4].text == "Audrey Hepburn lived there."


def test_what_a_document_is_is_read_in_whole_words_only() -> None:
    from sirerag.extraction.substitution import kind_words

    first = ("The Gray Owls is a dance ensemble from Portland, Oregon, whose founder and first leader was a "
             "bandleader")  # the definition's 80th character falls inside "bandleader", right after "band"
    assert "band" not in kind_words(first, "The Gray Owls") and "ensemble" in kind_words(first, "The Gray Owls")


def test_it_is_not_replaced_when_pronoun_substitution_is_off() -> None:
    doc = Document(id="d1", title="The Knife", text="The Knife is a 1961 film. It won a prize.")
    chunks = chunk_documents([doc], ChunkingConfig(mode="passage"))
    props = extract_offline(chunks, [doc], OfflineExtractor(resolve_pronouns=False))
    assert props[1].text == "It won a prize."


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
