"""``sirerag stats`` on a tiny corpus whose Table 3 figures were worked out by hand.

Offline extraction of the corpus below gives five propositions:

    A1 "Ada Lovelace was born in London in 1815."               Ada Lovelace, London, 1815
    A2 "Ada Lovelace worked with Charles Babbage on the Analytical Engine."   (from "She worked ...")
                                                                Ada Lovelace, Charles Babbage, Analytical Engine
    B1 "Charles Babbage designed the Analytical Engine."        Charles Babbage, Analytical Engine
    B2 "Babbage lived in London."                               Charles Babbage (completed name), London
    C1 "It rained all day."                                     (none: dropped from the tree)

Entities: Ada Lovelace {A1 A2}, London {A1 B2}, 1815 {A1}, Charles Babbage {A2 B1 B2},
Analytical Engine {A2 B1}: 5 entities, 2 / 3 / 1 propositions per entity (avg / max / min),
5 aggregates with distinct texts; with the redundant-entity rule 1815 (only A1, which is in
Ada Lovelace's aggregate) is skipped: 4.
"""
from __future__ import annotations

import json

import pytest

from sirerag.cli.main import main
from sirerag.report.stats import index_stats
from sirerag.core.config import BuildConfig, TreeConfig
from sirerag.pipeline.build import build_index
from sirerag.core.types import Document

DOCS = [
    Document(id="pa", title="Ada Lovelace", text="Ada Lovelace was born in London in 1815. She worked with "
                                                  "Charles Babbage on the Analytical Engine."),
    Document(id="pb", title="Charles Babbage", text="Charles Babbage designed the Analytical Engine. "
                                                     "Babbage lived in London."),
    Document(id="pc", title="Weather", text="It rained all day."),
]


def config(**relatedness) -> BuildConfig:  # noqa: ANN003
    return BuildConfig(tree=TreeConfig(levels=1)).with_overrides(chunking={"mode": "passage"},
                                                                  relatedness=relatedness)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):  # noqa: ANN001, ANN201
    out = tmp_path_factory.mktemp("tiny-index")
    build_index(DOCS, out, config(skip_redundant_entities=False), show_progress=False)
    return out


def test_table3_figures_of_a_known_corpus(index_dir) -> None:  # noqa: ANN001
    stats = index_stats(index_dir)
    assert stats["documents"] == 3 and stats["chunks"] == 3
    assert stats["propositions"] == 5
    assert stats["propositions_with_entities"] == 4 and stats["propositions_without_entities"] == 1
    assert stats["entities"] == 5
    assert stats["aggregates"] == 5
    assert stats["propositions_per_entity"] == {"avg": 2.0, "max": 3, "min": 1}
    assert stats["pool"] == {"relatedness/aggregate/level0": 5, "similarity/leaf/level0": 3}
    assert stats["pool_entries"] == 8
    assert stats["extractor"] == "offline:rules"
    assert stats["aggregation_rule"] == "all-entities"
    assert stats["extraction_failures"] == {"extract": 0, "rewrite_fallbacks": 0}


def test_cli_prints_table_and_json(index_dir, capsys) -> None:  # noqa: ANN001
    assert main(["stats", str(index_dir)]) == 0
    text = capsys.readouterr().out
    assert "proposition aggregates" in text and "avg 2.0  max 3  min 1" in text
    assert "relatedness/aggregate/level0" in text
    assert main(["stats", str(index_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entities"] == 5


def test_redundant_entity_rule_is_reported(tmp_path) -> None:  # noqa: ANN001
    build_index(DOCS, tmp_path, config(skip_redundant_entities=True), show_progress=False)
    stats = index_stats(tmp_path)
    assert stats["aggregates"] == 4 and stats["entities"] == 5
    assert stats["aggregation_rule"] == "skip-redundant-entities"


def test_not_an_index(tmp_path, capsys) -> None:  # noqa: ANN001
    assert main(["stats", str(tmp_path)]) == 1
    assert "not a sirerag index" in capsys.readouterr().err
