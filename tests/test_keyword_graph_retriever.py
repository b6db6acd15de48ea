"""``--retriever keyword-graph`` over an index of one story (a ``.jsonl`` of its sentences, MiniLM, no trees): the
graph reaches the sentences that share a name with the dense hit, ``ask --order document`` reads them in the story's
order, and its options are checked before any work. The reader is a scripted chat-completions server."""
from __future__ import annotations

import json

import pytest
from _llm_server import FlakyServer

import sirerag
from sirerag.cli.main import main
from sirerag.core.errors import ConfigError

#: Daniel takes the football and moves twice; "where is the football?" names only the first sentence
STORY = ["Daniel picked up the football.", "Mary went to the garden.", "Daniel went to the kitchen.",
         "Sandra journeyed to the hallway.", "Mary moved to the office.", "Daniel travelled to the bedroom.",
         "Sandra went back to the garden."]
QUESTION = "Where is the football?"
DANIEL = {"s1", "s3", "s6"}


@pytest.fixture(scope="module")
def story_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("kgstory")
    corpus = root / "story.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"s{i}", "title": "story", "text": text}) + "\n"
                              for i, text in enumerate(STORY, start=1)), encoding="utf-8")
    sirerag.Index.build(corpus, root / "index", trees=[], chunking={"mode": "passage"},
                        show_progress=False).close()
    return root / "index"


def _sentences(results) -> set[str]:
    return {p for r in results for p in r.passages}


def test_the_graph_reaches_the_holders_moves_that_dense_misses(story_index):
    with sirerag.Index.load(story_index) as index:
        dense = index.search(QUESTION, k=3, retriever="dense")
        assert dense[0].passages == ("s1",) and _sentences(dense) != DANIEL  # one of Daniel's moves is missed
        for mode in ("ppr", "hop"):
            graph = index.search(QUESTION, k=3, retriever="keyword-graph", mode=mode, seeds=1)
            assert graph[0].passages == ("s1",) and _sentences(graph) == DANIEL, mode
        baseline = index.search(QUESTION, k=3, retriever="keyword-graph", mode="dense")
        assert [r.entry_id for r in baseline] == [r.entry_id for r in dense]  # mode=dense is cosine alone


def test_the_story_title_is_no_keyword(story_index):
    """Every sentence of a ``.jsonl`` story starts with its title line; as a keyword it would link them all."""
    from sirerag.graph.keyword_graph import passage_keywords
    from sirerag.retrievers.keyword_graph import bodies

    with sirerag.Index.load(story_index) as index:
        leaves = index.pool.entries
        assert all(e.text.startswith("story\n") for e in leaves)
        texts = bodies(index.loaded, leaves)
        assert sorted(texts) == sorted(STORY)
        assert not any("story" in words for words in passage_keywords(texts, "both"))


def test_ask_reads_the_graphs_sentences_in_story_order(story_index, capsys):
    with FlakyServer(reply=lambda body: "bedroom") as server:
        assert main(["ask", str(story_index), QUESTION, "--llm", f"openai:reader@{server.url}", "-k", "3",
                     "--retriever", "keyword-graph", "--seeds", "1", "--order", "document", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["answer"] == "bedroom"
    assert [s["passages"] for s in answer["sources"]] == [["s1"], ["s3"], ["s6"]]  # the story's order
    context = server.bodies[0]["messages"][-1]["content"]
    where = [context.index(STORY[i]) for i in (0, 2, 5)]
    assert where == sorted(where) and STORY[1] not in context


def test_search_on_the_command_line_takes_the_graph_options(story_index, capsys):
    assert main(["search", str(story_index), QUESTION, "-k", "3", "--retriever", "keyword-graph",
                 "--graph-mode", "hop", "--seeds", "1", "--keywords", "entities", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert {p for h in hits for p in h["passages"]} == DANIEL


def test_bad_options_are_one_clear_error(story_index, capsys):
    with sirerag.Index.load(story_index) as index:
        with pytest.raises(ConfigError, match=r"7 passages, over keyword_graph.max_passages \(5\)"):
            index.search(QUESTION, retriever="keyword-graph", max_passages=5)
        with pytest.raises(ConfigError, match="keyword_graph.mode must be one of 'ppr', 'hop', 'dense', got 'walk'"):
            index.search(QUESTION, retriever="keyword-graph", mode="walk")
        with pytest.raises(ConfigError, match=r"retriever 'keyword-graph' does not take option\(s\) \['linking'\]"):
            index.search(QUESTION, retriever="keyword-graph", linking="ner")
    assert main(["search", str(story_index), QUESTION, "--retriever", "keyword-graph", "--seeds", "0"]) == 1
    assert "keyword_graph.seeds must be an integer >= 1, got 0" in capsys.readouterr().err
