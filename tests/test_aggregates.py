"""Proposition aggregates follow the paper's rules on hand-built propositions."""
from __future__ import annotations

import pytest

from sirerag.text.tokens import count_tokens
from sirerag.trees.aggregates import RULE_ALL, RULE_SKIP, build_aggregates, group_by_entity, table3_stats
from sirerag.core.types import Proposition


def prop(doc: str, chunk: int, index: int, text: str, *entities: str) -> Proposition:
    chunk_id = f"c-{doc}-{chunk}"
    return Proposition(id=Proposition.make_id(chunk_id, index, text), text=text, entities=tuple(entities),
                       chunk_id=chunk_id, doc_id=doc, index=index)


def by_entity(result) -> dict[str, list[str]]:  # noqa: ANN001
    out: dict[str, list[str]] = {}
    for node in result.nodes:
        out.setdefault(node.entity, []).append(node.text)
    return out


def test_grouping_order_dedup_and_dropping() -> None:
    props = [
        prop("d1", 0, 0, "Bacon wrote essays.", "Francis Bacon"),
        prop("d1", 0, 1, "The weather was fine."),  # no entity: dropped
        prop("d2", 0, 0, "Head I is a painting by Francis Bacon.", "Head I", "francis bacon "),
        prop("d1", 1, 0, "Bacon was born in London.", "Francis Bacon", "London"),  # d1 again, later chunk
        prop("d3", 0, 0, "Bacon wrote essays.", "FRANCIS BACON"),  # same text in another document: kept once
    ]
    result = build_aggregates(props, max_tokens=512)
    texts = by_entity(result)
    # documents in first-seen order (d1 before d2), original order inside d1, duplicate text once
    assert texts["Francis Bacon"] == ["Bacon wrote essays. Bacon was born in London. Head I is a painting by Francis Bacon."]
    node = next(n for n in result.nodes if n.entity == "Francis Bacon")
    assert node.kind == "aggregate" and node.tree == "relatedness" and node.level == 0
    assert node.passages == ("d1", "d2")
    assert node.propositions == (props[0].id, props[3].id, props[2].id)
    assert not any("weather" in n.text for n in result.nodes)
    assert result.stats["propositions_without_entities"] == 1
    assert result.stats["entities"] == 3  # francis bacon, head i, london (case/space folded)
    assert result.stats["aggregation_rule"] == RULE_ALL


def test_display_form_is_the_most_frequent() -> None:
    props = [prop("d1", 0, 0, "A.", "new york"), prop("d1", 0, 1, "B.", "New York"),
             prop("d2", 0, 0, "C.", "New York.")]
    groups = group_by_entity(props)
    assert [(g.key, g.display, len(g.propositions)) for g in groups] == [("new york", "New York", 3)]


def test_identical_aggregates_are_one_node() -> None:
    props = [prop("d1", 0, 0, "Paris is in France.", "Paris", "France")]
    result = build_aggregates(props)
    assert len(result.nodes) == 1
    assert result.nodes[0].entity == "Paris"
    assert result.stats["aggregates_merged_identical"] == 1


def test_cap_splits_into_ordered_parts_without_losing_text() -> None:
    sentences = [f"Ada Lovelace fact number {i} is a sentence with several more words in it." for i in range(12)]
    props = [prop("d1", 0, i, s, "Ada Lovelace") for i, s in enumerate(sentences)]
    cap = 48
    result = build_aggregates(props, max_tokens=cap)
    parts = [n for n in result.nodes if n.entity == "Ada Lovelace"]
    assert len(parts) > 1
    assert all(count_tokens(n.text) <= cap for n in parts)
    assert " ".join(n.text for n in parts) == " ".join(sentences)  # ordered, nothing dropped or cut
    assert [pid for n in parts for pid in n.propositions] == [p.id for p in props]
    assert result.stats["entities_split"] == 1


def test_a_proposition_longer_than_the_cap_stands_alone_untruncated() -> None:
    long = "Ada Lovelace " + "wrote very long notes " * 40 + "."
    props = [prop("d1", 0, 0, "Ada Lovelace was a mathematician.", "Ada Lovelace"),
             prop("d1", 0, 1, long, "Ada Lovelace")]
    result = build_aggregates(props, max_tokens=32)
    texts = [n.text for n in result.nodes]
    assert texts == ["Ada Lovelace was a mathematician.", " ".join(long.split())]
    assert result.stats["oversized_propositions"] == 1


def test_skip_redundant_entities_rule() -> None:
    props = [
        prop("d1", 0, 0, "Ada Lovelace was born in 1815.", "Ada Lovelace", "1815"),
        prop("d1", 0, 1, "Ada Lovelace worked with Charles Babbage.", "Ada Lovelace", "Charles Babbage"),
        prop("d2", 0, 0, "Paris is in France.", "Paris", "France"),  # both single: never both dropped
    ]
    plain = build_aggregates(props)
    skip = build_aggregates(props, skip_redundant=True)
    assert set(by_entity(plain)) == {"Ada Lovelace", "1815", "Charles Babbage", "Paris"}
    # 1815 and Charles Babbage only repeat one proposition of the Ada Lovelace aggregate
    assert set(by_entity(skip)) == {"Ada Lovelace", "Paris"}
    assert skip.stats["entities_skipped_redundant"] == 2
    assert skip.stats["aggregation_rule"] == RULE_SKIP
    covered = {pid for n in skip.nodes for pid in n.propositions}
    assert covered == {p.id for p in props}  # every entity-linked proposition is still in an aggregate


def test_table3_figures() -> None:
    props = [prop("d1", 0, 0, "A.", "X", "Y"), prop("d1", 0, 1, "B.", "X"), prop("d2", 0, 0, "C.", "X"),
             prop("d2", 0, 1, "D.")]
    stats = table3_stats(props)
    assert stats["propositions"] == 4 and stats["propositions_with_entities"] == 3
    assert stats["entities"] == 2
    assert stats["propositions_per_entity"] == {"avg": 2.0, "max": 3, "min": 1}


def test_empty_and_invalid_inputs() -> None:
    assert build_aggregates([]).nodes == ()
    assert build_aggregates([prop("d", 0, 0, "nothing here")]).stats["entities"] == 0
    with pytest.raises(ValueError, match="max_tokens"):
        build_aggregates([], max_tokens=0)
