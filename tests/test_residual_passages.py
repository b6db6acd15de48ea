"""Residual ranking of the passages a question reached (``bridge_residual``, sirerag.graph.residual): which of a
bridged entity's passages gets reset weight of its own, scored by what is left of the question."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sirerag.core.config.retrieval import BridgeSettings, PPRSettings
from sirerag.core.errors import ConfigError
from sirerag.graph.chain import Rest, keys
from sirerag.graph.linking import Bridge, Seeds
from sirerag.graph.residual import ResidualPassages

QUESTION = "Who did the state where Pleasant View Home was located vote for in 2016?"
NAMES = ["Pleasant View Home"]
BRIDGING = "Pleasant View Home is located in Concord, New Hampshire."
# entities: 0 Pleasant View Home (the seed), 1 New Hampshire (bridged); passage nodes 2..5
PASSAGES = [
    BRIDGING,  # 2: the passage of the bridging proposition
    "New Hampshire is a state in New England.",  # 3: titled by New Hampshire
    "The 2016 presidential election in New Hampshire: the state voted for Hillary Clinton.",  # 4
    "The economy of New Hampshire: a state with located industries.",  # 5
]
VOCABULARY = sorted(keys(" ".join([QUESTION, *PASSAGES])))


def encode(texts: list[str]) -> np.ndarray:
    """A bag of word keys as the toy embedder (L2-normalised; no text embeds as zeros)."""
    rows = np.array([[1.0 if k in keys(t) else 0.0 for k in VOCABULARY] for t in texts], dtype=np.float32) + 0.01
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def graph_parts() -> tuple[sp.csr_matrix, np.ndarray]:
    edges = [(0, 2), (1, 2), (1, 3), (1, 4), (1, 5)]  # the home is named in passage 2, New Hampshire in all four
    rows, cols = zip(*edges)
    upper = sp.coo_matrix((np.ones(len(edges)), (rows, cols)), shape=(6, 6))
    return (upper + upper.T).tocsr(), encode(PASSAGES)


@pytest.fixture
def residual() -> ResidualPassages:
    adjacency, vectors = graph_parts()
    # one leaf per passage, in pool rows 3, 2, 1, 0 (the pool's order is not the graph's)
    return ResidualPassages(adjacency, 2, vectors[::-1], leaf_rows=np.array([3, 2, 1, 0]),
                            leaf_passages=np.array([0, 1, 2, 3]), titled={1: [3]})


def seeds() -> Seeds:
    bridge = Bridge(node=1, hop=1, via=0, text=BRIDGING, score=0.6, passage=2)
    return Seeds(entities={0: 0.5, 1: 0.2}, bridges=[bridge])


def test_a_bridged_entity_carries_what_is_left_after_its_bridging_proposition(residual):
    anchors = residual.anchors(seeds(), QUESTION, NAMES, BridgeSettings(residual_seeds=False))
    assert [a.node for a in anchors] == [1]
    (nh,) = anchors
    assert nh.rest == Rest.of(QUESTION, NAMES).after(BRIDGING) and nh.rest.text == "state vote 2016"
    assert nh.weight == 0.2 and nh.skip == {2, 3}  # its title's passage and the bridging proposition's
    both = residual.anchors(seeds(), QUESTION, NAMES, BridgeSettings(residual_seeds=True))
    assert [(a.node, a.rest.text) for a in both] == [(0, "state located vote 2016"), (1, "state vote 2016")]


def test_the_passage_that_matches_what_is_left_is_picked_not_the_one_matching_the_whole_question(residual):
    (nh,) = residual.anchors(seeds(), QUESTION, NAMES, BridgeSettings())
    nodes, scores = residual.scores(nh, encode([nh.rest.text])[0])
    assert nodes == [4, 5] and scores[0] > scores[1]
    assert residual.best(nh, encode([nh.rest.text])[0])[0] == 4
    # by the whole question the economy passage ("located") ties or wins: the rest is what tells them apart
    by_question = residual.scores(nh, encode([QUESTION])[0])[1]
    assert by_question[0] - by_question[1] < scores[0] - scores[1]


def test_the_best_passage_gets_residual_times_the_entitys_reset_weight(residual):
    calls = []

    def counted(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return encode(texts)

    found = [seeds(), seeds()]
    settings = BridgeSettings(residual=0.5, residual_seeds=False)
    residual.add_to(found, [QUESTION, QUESTION], [NAMES, NAMES], encode([QUESTION, QUESTION]), settings, counted)
    assert calls == [["state vote 2016"]]  # one batch, each distinct rest once
    assert all(s.passages == {4: pytest.approx(0.5 * 0.2)} for s in found)
    off = seeds()
    residual.add_to([off], [QUESTION], [NAMES], encode([QUESTION]), BridgeSettings(), counted)
    assert off.passages == {} and len(calls) == 1


def test_top_keeps_the_picks_with_the_largest_weight_times_cosine(residual):
    settings = BridgeSettings(residual=1.0, residual_seeds=True)
    every = seeds()
    residual.add_to([every], [QUESTION], [NAMES], encode([QUESTION]), settings, encode)
    assert every.passages == {2: pytest.approx(0.5), 4: pytest.approx(0.2)}  # the seed's only passage, and 4
    home, nh = residual.anchors(seeds(), QUESTION, NAMES, settings)
    by_weight_and_cosine = {2: 0.5 * residual.best(home, encode([home.rest.text])[0])[1],
                            4: 0.2 * residual.best(nh, encode([nh.rest.text])[0])[1]}
    kept = max(by_weight_and_cosine, key=by_weight_and_cosine.__getitem__)
    one = seeds()
    residual.add_to([one], [QUESTION], [NAMES], encode([QUESTION]), BridgeSettings(
        residual=1.0, residual_seeds=True, residual_top=1), encode)
    assert one.passages == {kept: every.passages[kept]}


def test_an_entity_with_nothing_left_of_the_question_gives_no_weight(residual):
    question = "Where is Pleasant View Home located?"
    found = seeds()
    residual.add_to([found], [question], [NAMES], encode([question]), BridgeSettings(residual=1.0), encode)
    assert found.passages == {}


def test_the_question_itself_scores_without_encoding(residual):
    def never(texts: list[str]) -> np.ndarray:
        raise AssertionError(f"encoded {texts}")

    found = seeds()
    query = encode([QUESTION])
    residual.add_to([found], [QUESTION], [NAMES], query, BridgeSettings(residual=1.0, residual_by="question"), never)
    (nh,) = residual.anchors(seeds(), QUESTION, NAMES, BridgeSettings())
    assert found.passages == {residual.best(nh, query[0])[0]: pytest.approx(0.2)}


def test_leaf_rows_and_passages_must_pair_up():
    adjacency, vectors = graph_parts()
    with pytest.raises(ValueError, match="3 leaf rows for 4 leaf passages"):
        ResidualPassages(adjacency, 2, vectors, np.arange(3), np.arange(4), {})


def test_the_residual_is_a_setting_off_by_default_and_checked():
    default = PPRSettings().bridge
    assert default.residual == 0.0 and default.residual_by == "rest" and default.residual_top == 0
    assert not default.residual_seeds and not default.residual_words
    on = PPRSettings.from_options(bridge_residual=0.1, bridge_residual_by="question", bridge_residual_top=2)
    assert (on.bridge.residual, on.bridge.residual_by, on.bridge.residual_top) == (0.1, "question", 2)
    with pytest.raises(ConfigError, match="bridge_residual"):
        PPRSettings.from_options(bridge_residual=-1.0)
    with pytest.raises(ConfigError, match="bridge_residual_by"):
        PPRSettings.from_options(bridge_residual_by="words")
    with pytest.raises(ConfigError, match="bridge_residual_top"):
        PPRSettings.from_options(bridge_residual_top=-1)


def test_with_words_a_pick_must_share_a_word_with_what_is_left():
    adjacency, vectors = graph_parts()
    texts = {0: "Economy.", 1: PASSAGES[2], 2: PASSAGES[1], 3: PASSAGES[0]}  # pool row -> leaf text (rows reversed)
    unrelated = {**texts, 1: "A passage about nothing asked."}
    picked = {}
    for name, leaf_text in (("texts", texts), ("unrelated", unrelated)):
        residual = ResidualPassages(adjacency, 2, vectors[::-1], np.array([3, 2, 1, 0]), np.array([0, 1, 2, 3]),
                                    {1: [3]}, leaf_text=texts.__getitem__ if name == "texts" else unrelated.__getitem__)
        for words in (False, True):
            found = seeds()
            residual.add_to([found], [QUESTION], [NAMES], encode([QUESTION]),
                            BridgeSettings(residual=1.0, residual_words=words), encode)
            picked[name, words] = found.passages
    # passage 4's vector is the one scored; its leaf text decides whether the pick stands
    assert picked["texts", False] == picked["texts", True] == picked["unrelated", False] == {4: pytest.approx(0.2)}
    assert picked["unrelated", True] == {}


def test_with_propositions_a_passage_scores_as_its_best_proposition():
    from sirerag.graph.bridging import PropositionBridge
    from sirerag.graph.build import GraphFact

    adjacency, vectors = graph_parts()
    facts = [GraphFact("f0", BRIDGING, "p0", (0, 1)),
             GraphFact("f1", "New Hampshire has an economy.", "p2", (1,)),  # passage 4's only proposition
             GraphFact("f2", "New Hampshire is a state where industries are located.", "p3", (1,))]
    bridge = PropositionBridge(facts, encode([f.text for f in facts]), entity_passages=np.ones(2))
    residual = ResidualPassages(adjacency, 2, vectors, np.arange(4), np.arange(4), {1: [3]})
    (nh,) = residual.anchors(seeds(), QUESTION, NAMES, BridgeSettings())
    rest = encode([nh.rest.text])[0]
    assert residual.best(nh, rest) == (4, pytest.approx(float(vectors[2] @ rest)))  # by the leaves
    residual.with_propositions(bridge, {"p0": 2, "p1": 3, "p2": 4, "p3": 5})
    nodes, scores = residual.scores(nh, rest, propositions=True)
    assert nodes == [4, 5] and scores == pytest.approx([float(encode([f.text])[0] @ rest) for f in facts[1:]])
    assert residual.best(nh, rest, propositions=True)[0] == 5  # "state" and nothing of the election's
