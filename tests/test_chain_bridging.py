"""Hop-by-hop bridging (``bridge_chain``, sirerag.graph.chain): what is left of a question after its linked names
and after each proposition followed, how a further hop is scored by it, and where the chain stops."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sirerag.core.config.retrieval import BridgeSettings, PPRSettings
from sirerag.core.errors import ConfigError
from sirerag.graph.bridging import PropositionBridge
from sirerag.graph.build import GraphFact
from sirerag.graph.chain import Chain, Rest, key, keys
from sirerag.retrievers.ppr import PPRRetriever

QUESTION = "Where was the spouse of the director of Sleep, My Love born?"
NAMES = ["Sleep, My Love"]

# entities: 0 Sleep, My Love, 1 Douglas Sirk, 2 Hilde Jary, 3 Cologne, 4 Claudette Colbert, 5 Lyon
FACTS = [
    GraphFact("f0", "Sleep, My Love was directed by Douglas Sirk.", "p0", (0, 1)),
    GraphFact("f1", "Sleep, My Love stars Claudette Colbert.", "p0", (0, 4)),
    GraphFact("f2", "Douglas Sirk married his spouse Hilde Jary.", "p1", (1, 2)),
    GraphFact("f3", "Douglas Sirk shot a film in Lyon.", "p1", (1, 5)),
    GraphFact("f4", "Hilde Jary was born in Cologne.", "p2", (2, 3)),
]
#: a bag of word keys is the toy embedder: a text's vector counts the keys it shares with this vocabulary
VOCABULARY = sorted(keys(" ".join([QUESTION] + [f.text for f in FACTS])))


def encode(texts: list[str]) -> np.ndarray:
    rows = np.array([[1.0 if k in keys(t) else 0.0 for k in VOCABULARY] for t in texts], dtype=np.float32)
    rows[:, VOCABULARY.index("sirk")] += 0.01  # no text embeds as zeros
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


QUERY = encode([QUESTION])[0]


@pytest.fixture
def bridge():
    return PropositionBridge(FACTS, encode([f.text for f in FACTS]), entity_passages=np.ones(6))


def chain(question: str = QUESTION, words: bool = True) -> Chain:
    return Chain(Rest.of(question, NAMES), encode, words=words)


def test_the_rest_of_a_question_is_its_content_words_without_the_linked_names():
    rest = Rest.of(QUESTION, NAMES)
    assert rest.words == ("spouse", "director", "sleep", "love", "born")
    assert rest.left == ("spouse", "director", "born") and rest.text == "spouse director born"


def test_a_followed_proposition_uses_the_question_words_it_matches_by_key():
    assert key("directed") == key("director") == "direc" and key("films") == "film" and key("class") == "class"
    rest = Rest.of(QUESTION, NAMES).after(FACTS[0].text)  # "directed" uses "director"
    assert rest.left == ("spouse", "born") and rest.matches("married his spouse") and not rest.matches("a film")
    assert rest.after(FACTS[2].text).after(FACTS[4].text).text == ""  # nothing left


def test_the_first_hop_is_scored_by_the_whole_question_as_without_the_chain(bridge):
    one = BridgeSettings(hops=1, top=2)
    assert bridge.bridges(QUERY, [0], one, chain=chain()) == bridge.bridges(QUERY, [0], one)


def test_each_further_hop_is_scored_by_what_is_left_and_follows_the_chain(bridge):
    found = bridge.bridges(QUERY, [0], BridgeSettings(hops=3, top=1), chain=chain())
    assert [(b.node, b.hop, b.via) for b in found] == [(1, 1, 0), (2, 2, 1), (3, 3, 2)]
    left = Rest.of(QUESTION, NAMES).after(FACTS[0].text)  # "spouse born"
    assert found[1].score == pytest.approx(float(encode([FACTS[2].text])[0] @ encode([left.text])[0]))
    assert found[2].score == pytest.approx(float(encode([FACTS[4].text])[0] @ encode(["born"])[0]))


def test_the_chain_stops_when_nothing_is_left(bridge):
    question = "Who is the director of Sleep, My Love?"
    query = encode([question])[0]
    plain = bridge.bridges(query, [0], BridgeSettings(hops=3, top=1))
    assert [b.hop for b in plain][:2] == [1, 2]  # without the chain the next hop is taken
    chained = bridge.bridges(query, [0], BridgeSettings(hops=3, top=1), chain=chain(question))
    assert [(b.node, b.hop) for b in chained] == [(1, 1)]  # "directed" used the only word left


def test_a_further_hop_follows_only_propositions_that_share_a_word_with_what_is_left(bridge):
    question = "Who is the spouse of the director of Sleep, My Love?"
    query = encode([question])[0]
    wide = BridgeSettings(hops=2, top=2)
    found = bridge.bridges(query, [0], wide, chain=chain(question))
    assert {b.node for b in found if b.hop == 2} == {2}  # "shot a film in Lyon" shares no word with "spouse"
    loose = bridge.bridges(query, [0], wide, chain=chain(question, words=False))
    assert {b.node for b in loose if b.hop == 2} == {2, 5}


def test_each_branch_keeps_its_own_rest(bridge):
    found = bridge.bridges(QUERY, [0], BridgeSettings(hops=2, top=2), chain=chain(words=False))
    assert {b.node: b.hop for b in found} == {1: 1, 4: 1, 2: 2, 5: 2}
    # the branch through Claudette Colbert used no word: nothing reached from it, and the hop from
    # Douglas Sirk was scored by "spouse born" (what the director's branch left)
    spouse = next(b for b in found if b.node == 2)
    assert spouse.via == 1
    assert spouse.score == pytest.approx(float(encode([FACTS[2].text])[0] @ encode(["spouse born"])[0]))


def test_the_chain_is_a_setting_off_by_default_and_checked():
    assert PPRSettings().bridge.chain is False
    on = PPRSettings.from_options(bridge_chain=True, bridge_chain_words=False)
    assert on.bridge.chain and not on.bridge.chain_words
    with pytest.raises(ConfigError, match="bridge_chain"):
        PPRSettings.from_options(bridge_chain="yes")
    retriever = SimpleNamespace(bridge_settings=on.bridge, embedder=SimpleNamespace(encode_queries=encode))
    made = PPRRetriever.chain(retriever, QUESTION, NAMES)
    assert made is not None and made.rest == Rest.of(QUESTION, NAMES) and not made.words
    off = SimpleNamespace(bridge_settings=BridgeSettings(), embedder=None)
    assert PPRRetriever.chain(off, QUESTION, NAMES) is None


def test_a_question_with_several_seeds_chains_from_each_through_its_best_proposition(bridge):
    settings = BridgeSettings(hops=3, top=2, max_seeds=1, seed_weight=0.3)
    plain = bridge.each_seed(QUERY, [0, 4], settings)
    assert {b.hop for b in plain} == {1}  # one hop from each seed without the chain
    chained = bridge.each_seed(QUERY, [0, 4], settings, chain())
    assert [(b.node, b.hop) for b in sorted(chained, key=lambda b: b.hop)] == [(1, 1), (2, 2), (3, 3)]


def test_without_decay_a_deep_hop_is_capped_by_its_seeds_weight_not_its_parents(bridge):
    from sirerag.graph.linking import Seeds

    weights = {}
    for decay in (True, False):
        seeds = Seeds(entities={0: 1.0})
        bridge.add_to(seeds, QUERY, BridgeSettings(hops=2, top=1, weight=0.5, chain_decay=decay), chain())
        weights[decay] = seeds
    first, second = weights[True].bridges
    assert weights[True].entities[1] == pytest.approx(0.5 * first.score)  # specificity 1, seed weight 1
    assert weights[True].entities[2] == pytest.approx(0.5 * second.score * 0.5 * first.score)
    assert weights[False].entities[2] == pytest.approx(0.5 * second.score)
