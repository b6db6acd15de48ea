"""Title nodes, longest-match surface linking, hybrid passage seeds (the "graph v2" of the dated studies; no model
needed)."""
from __future__ import annotations

import re
import sys
import zlib

import numpy as np
import pytest

from sirerag.graph.build import build_graph
from sirerag.core.types import Node, Pool, Proposition


class HashEmbedder:
    """Bag of hashed words, L2-normalised: deterministic and model-free."""

    spec = "hash"
    dim = 256

    def encode_documents(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    encode_queries = encode_documents


# (title, text, entities of its one proposition)
DOCS = [
    ("Marta Kowalski", "Marta Kowalski was born in Zielonka in 1952.", ("Marta Kowalski", "Zielonka")),
    ("Zielonka", "A village beside Biała Creek, lined with willows.", ("Biała Creek",)),
    ("Marta", "Marta is a given name; Marta Nowak was a painter born in Gdańsk.", ("Marta", "Marta Nowak", "Gdańsk")),
    ("Kowalski", "Kowalski is a surname common in Poland, where many rivers flow.", ("Kowalski", "Poland")),
    ("Vistula", "The Vistula is the longest river of Poland.", ("Vistula", "Poland")),
    ("Oder", "The Oder river runs past Wrocław.", ("Oder", "Wrocław")),
]
QUESTION = "Which river flows through the birthplace of Marta Kowalski?"


def corpus(title_weight: float):
    ids = [f"p{i}" for i in range(len(DOCS))]
    props = [Proposition(id=f"f{i}", text=text, entities=ents, chunk_id=f"c{i}", doc_id=ids[i], index=0)
             for i, (_, text, ents) in enumerate(DOCS)]
    graph = build_graph(ids, props, titles=[t for t, _, _ in DOCS], title_weight=title_weight,
                        embedder=HashEmbedder(), synonym_max_neighbors=0)
    entries = tuple(Node(id=f"l{i}", text=f"{t}\n{x}", kind="leaf", tree="similarity", level=0, passages=(ids[i],))
                    for i, (t, x, _) in enumerate(DOCS))
    pool = Pool(entries=entries, embeddings=HashEmbedder().encode_documents([e.text for e in entries]))
    return graph, pool


def test_title_nodes_alias_entities_and_weigh_more():
    graph, _ = corpus(title_weight=3.0)
    zielonka, p1, p0 = graph.entity_node("Zielonka"), graph.passage_index["p1"], graph.passage_index["p0"]
    assert graph.adjacency[zielonka, p1] == 3.0  # title edge of its own document
    assert graph.adjacency[zielonka, p0] == 1.0  # an ordinary mention
    assert graph.entity_passages[zielonka] == 2
    oder = graph.entity_node("Oder")
    assert graph.adjacency[oder, graph.passage_index["p5"]] == 4.0  # title and mention add up
    assert graph.stats["title_edges"] == len(DOCS) and graph.stats["title_only_nodes"] == 0
    assert graph.stats["fact_embeddings"] == len(DOCS) and set(graph.stats["seconds"]) >= {"structure", "synonyms"}


def test_surface_index_takes_longest_non_overlapping_matches():
    from sirerag.graph.surface import SurfaceIndex

    index = SurfaceIndex(["Marta", "Kowalski", "Marta Kowalski", "Kraków Creek", "Film", "Oder"])
    found = index.match("Did Marta Kowalski paint Krakow Creek for a film? MARTA did. Order?")
    assert [(m.text, m.node) for m in found] == [("Marta Kowalski", 2), ("Krakow Creek", 3), ("MARTA", 0)]
    assert [m.text for m in index.match("the film about marta")] == ["film", "marta"]  # a lower-case query


def test_words_that_open_a_question_are_not_linked_there():
    from sirerag.graph.surface import SurfaceIndex

    index = SurfaceIndex(["What", "What Is", "What Is Love", "The Who", "Which", "Marta", "Is It Over"])
    assert [m.text for m in index.match("What is the place of birth of Marta's husband?")] == ["Marta"]
    assert [m.text for m in index.match("  Which Marta?")] == ["Marta"]
    assert [m.text for m in index.match("what is marta")] == ["marta"]  # a lower-case query too
    assert [m.text for m in index.match("What Is Love was sung by whom?")] == ["What Is Love"]  # names a song
    assert [m.text for m in index.match("The Who played where?")] == ["The Who"]  # an article, then a name
    assert [m.text for m in index.match("Did Marta sing What Is Love or Is It Over?")] == \
        ["Marta", "What Is Love", "Is It Over"]  # inside the question they are titles


def test_a_tagged_entity_inside_a_surface_match_is_not_linked_again():
    """The tagger's "Film" lies in the matched title "The Knife (1961 Film)", even though the question says
    "film" earlier, outside it: only an occurrence that overlaps no match links on its own."""
    from sirerag.graph.surface import SurfaceIndex, covered as _covered

    query = "Why did the director of film The Knife (1961 Film) die?"
    matches = SurfaceIndex(["The Knife (1961 film)"]).match(query)
    assert [m.text for m in matches] == ["The Knife (1961 Film)"]
    assert _covered(query, "Film", matches) and _covered(query, "The Knife", matches)
    assert not _covered(query, "director", matches) and not _covered(query, "Marta", matches)
    assert not _covered("A film, then The Knife?", "film", SurfaceIndex(["The Knife"]).match("A film, then The Knife?"))


def test_surface_matches_are_those_of_an_aho_corasick_automaton_over_the_forms():
    """The table lookup over word-boundary spans finds what the automaton it replaced found."""
    ahocorasick = pytest.importorskip("ahocorasick")
    from sirerag.graph.surface import SurfaceIndex, fold, surface_forms

    names = ["Marta", "Kowalski", "Marta Kowalski", "Kraków Creek", "Film", "Oder", "St. Mary's", "U.S.",
             "Mary", "New York", "New York City", "York", "1607", "AC/DC", "Zoë"]
    index = SurfaceIndex(names)
    automaton = ahocorasick.Automaton()
    for form, node in surface_forms(names):
        automaton.add_word(form, (len(form), node))
    automaton.make_automaton()

    def reference(query):  # the automaton's search, as SurfaceIndex.match did it before
        text = next(t for t in (fold(query), query.casefold(), query.lower()) if len(t) == len(query))
        lower = not any(ch.isupper() for ch in query)
        found = []
        for end, (length, node) in automaton.iter(text):
            start = end - length + 1
            if start > 0 and text[start - 1].isalnum() or end + 1 < len(text) and text[end + 1].isalnum():
                continue
            span = query[start:end + 1]
            if lower or any(ch.isupper() or ch.isdigit() for ch in span):
                found.append((start, end + 1, node))
        found.sort(key=lambda m: (m[0] - m[1], m[0]))
        taken = []
        for m in found:
            if all(m[1] <= t[0] or m[0] >= t[1] for t in taken):
                taken.append(m)
        return sorted(taken)

    queries = ["Did Marta Kowalski visit New York City or St. Mary's in 1607?", "AC/DC played in New York, U.S.",
               "Was Zoë born in Yorkshire or York?", "the new york film", "MaryMarta Kowalski's Oder-Film",
               "", "   ", "U.S.A. and the U.S. and St. Mary", "zoe and ZOE and Zoe"]
    for query in queries:
        assert [(m.start, m.end, m.node) for m in index.match(query)] == reference(query), query


@pytest.mark.parametrize("title_weight", [0.0, 2.0])
def test_second_hop_without_shared_words_is_reached_through_the_title(title_weight):
    from sirerag.retrievers.ppr import PPRRetriever

    graph, pool = corpus(title_weight)
    second = set(re.findall(r"\w+", DOCS[1][1].lower()))
    assert not second & set(re.findall(r"\w+", QUESTION.lower()))
    ppr = PPRRetriever(graph, pool, HashEmbedder(), linking="ner", tagger=lambda q: [], passage_weight=0.05)
    seeds = ppr.link([QUESTION], HashEmbedder().encode_queries([QUESTION]))[0]
    assert [text for text, _, _ in seeds.query_entities] == ["Marta Kowalski"]  # longest match, not Marta/Kowalski
    ranked = [h.entry_id for h in ppr.search(QUESTION, k=6)]
    assert ranked[0] == "l0"
    if title_weight:
        assert ranked.index("l1") == 1
    else:
        assert ranked.index("l1") > 1  # no title node: the second passage is not linked to Zielonka


def test_passage_seeds_mix_dense_and_bm25():
    pytest.importorskip("bm25s")
    from sirerag.graph.linking import min_max
    from sirerag.retrievers.ppr import PPRRetriever

    graph, pool = corpus(2.0)
    dense_only = PPRRetriever(graph, pool, HashEmbedder(), linking="ner", tagger=lambda q: [],
                              passage_weight=0.05, passage_seeds="dense")
    mixed = PPRRetriever(graph, pool, HashEmbedder(), linking="ner", tagger=lambda q: [], passage_weight=0.05,
                         bm25_share=0.5)
    row = HashEmbedder().encode_queries(["Oder river"])[0] @ pool.embeddings.T
    lexical = mixed.seeder.bm25.scores("Oder river")
    np.testing.assert_allclose(mixed.seed_scores("Oder river", row), 0.5 * min_max(row) + 0.5 * min_max(lexical))
    np.testing.assert_allclose(dense_only.seed_scores("Oder river", row), min_max(row))


def test_linking_a_query_takes_work_in_proportion_to_its_length():
    """Issue 43: PPR search time grew with the square of the query's length (250 KB: 10 s, 1 MB: 167 s), from
    the surface matching (every word end tried after every word start; each match checked against every match
    kept) and the test of each tagged entity against every match. The Python lines run to link a query of n
    and of 2n characters are counted (no clock): twice the text, about twice the lines."""
    from sirerag.extraction.offline import offline_extractor
    from sirerag.retrievers.ppr import PPRRetriever

    graph, pool = corpus(2.0)
    tagger = offline_extractor("rules", lambda: [text for _, text, _ in DOCS]).tag
    ppr = PPRRetriever(graph, pool, HashEmbedder(), linking="ner", tagger=tagger, passage_seeds="dense")
    text = " ".join(f"{title} met {text}" for title, text, _ in DOCS) + " "

    def lines_run(repeat: int):
        query, count = text * repeat, 0

        def trace(frame, event, arg):
            nonlocal count
            count += event == "line"
            return trace

        vector = HashEmbedder().encode_queries([query])
        before = sys.gettrace()
        sys.settrace(trace)
        try:
            seeds = ppr.link([query], vector)[0]
        finally:
            sys.settrace(before)
        return count, seeds

    small, seeds = lines_run(30)
    large, _ = lines_run(60)
    assert {"Marta Kowalski", "Oder", "Vistula"} <= {name for name, _, _ in seeds.query_entities}
    assert large < 2.2 * small, (small, large)
