"""Wrong arguments to the Python API and the framework retrievers (issue 43): each is one TypeError or InputError
naming the argument, raised before any work (no retriever loaded, no model called, no folder written); documents
given as dicts are checked as ``.jsonl`` rows; queries are cleaned as corpus texts are and capped in length
(``QueryConfig.max_chars``) wherever they enter, the command line included."""
from __future__ import annotations

import io
import json
import sys

import pytest
from _tiny_index import QUESTION, ROWS, build_tiny_index

import sirerag
from sirerag.cli.main import main
from sirerag.core.config import QueryConfig
from sirerag.core.errors import ConfigError, InputError

LIMIT = QueryConfig().max_chars


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("api_inputs"))


@pytest.fixture
def index(index_dir):
    with sirerag.Index.load(index_dir) as loaded:
        yield loaded


def _untouched(index) -> None:
    """Nothing was loaded (no retriever) and the index was not rewritten."""
    assert index._retrievers == {}
    assert sirerag.Index.load(index.path).loaded.commit == index.loaded.commit


@pytest.mark.parametrize("query, pattern", [
    (None, r"^query must be a str \(a question or keywords\), got None$"),
    (123, r"^query must be a str \(a question or keywords\), got int$"),
    (b"Who designed the Harwick Bridge?", r"^query must be a str .*got bytes: decode it first"),
    (["Elm river"], r"^query must be a str .*got list$"),
])
def test_a_query_that_is_not_a_str_is_a_type_error(index, query, pattern):
    with pytest.raises(TypeError, match=pattern):
        index.search(query)
    with pytest.raises(TypeError, match=pattern):
        index.ask(query, llm="openai:m@http://127.0.0.1:9/v1")
    _untouched(index)


@pytest.mark.parametrize("batch", ["Keala", b"Keala"])
def test_a_string_is_not_a_batch_of_queries(index, batch):
    with pytest.raises(TypeError, match=r"^queries must be a list of str, got (str|bytes): search\(\) takes one"):
        index.search_many(batch)
    with pytest.raises(TypeError, match=r"^query 2 must be a str .*got int$"):
        index.search_many(["Elm river", 5])
    _untouched(index)
    assert [len(r) for r in index.search_many(q for q in ["Elm river", "Botswana"])] == [3, 3]  # a generator


def test_retriever_and_pool_options_of_the_wrong_type(index):
    with pytest.raises(TypeError, match=r"^retriever must be a retriever name such as 'dense'.* got int$"):
        index.search("bridge", retriever=123)
    with pytest.raises(ConfigError, match=r"^leaf_share must be a number, got 'x'$"):
        index.search("bridge", leaf_share="x")
    with pytest.raises(ConfigError, match=r"^lift_ratio must be a number, got None$"):
        index.search("bridge", retriever="bm25", lift_ratio=None)
    _untouched(index)


@pytest.mark.parametrize("llm", [None, 5, object()])
def test_ask_refuses_an_llm_that_is_neither_spec_nor_model_before_retrieving(index, llm):
    with pytest.raises(TypeError, match=r"^llm must be an LLM spec such as 'openai:MODEL@http://HOST:PORT/v1'"):
        index.ask(QUESTION, llm=llm)
    with pytest.raises(ConfigError, match=r"^llm must look like openai:MODEL"):
        index.ask(QUESTION, llm="nonsense")
    _untouched(index)


@pytest.mark.parametrize("ids, error, pattern", [
    (123, TypeError, r"^ids must be a document id \(str\) or a list of them, got int$"),
    ([123], TypeError, r"^ids\[0\] must be a str \(document ids are strings: '123'\), got int$"),
    (["elm", None], TypeError, r"^ids\[1\] must be a str, got None$"),
    ([], InputError, r"^ids is empty"),
    ([" "], InputError, r"^ids\[0\] must be a document id, got ' '$"),
])
def test_remove_checks_its_ids(index, ids, error, pattern):
    with pytest.raises(error, match=pattern):
        index.remove(ids)
    _untouched(index)


@pytest.mark.parametrize("corpus, error, pattern", [
    (123, TypeError, r"^corpus must be a path \(a .jsonl/.json file or a folder\) or a list of documents.* got int$"),
    (None, TypeError, r"^corpus must be a path .* got None$"),
    (b"docs", TypeError, r"^corpus must be a path .* got bytes$"),
    ({"id": "x", "text": "y"}, TypeError, r"^corpus must be a path .* got one dict: put it in a list$"),
    (["s"], TypeError, r"^corpus\[0\] must be a dict with a 'text' field or a sirerag Document, got str$"),
    ([{"text": 5}], InputError, r"^corpus\[0\]: 'text' must be a string, got a JSON number$"),
    ([{"id": "a", "text": "one"}, {"id": "a", "text": "two"}], InputError,
     r"^corpus\[1\]: id 'a' is already used by a different document \(corpus\[0\]\)"),
    ([], InputError, r"^corpus: empty corpus \(no documents\)$"),
])
def test_add_checks_its_corpus_as_a_jsonl_row(index, corpus, error, pattern):
    with pytest.raises(error, match=pattern):
        index.add(corpus)
    _untouched(index)


def test_build_takes_a_list_of_dicts_checked_as_jsonl_rows_and_refuses_the_rest_first(tmp_path):
    with pytest.raises(TypeError, match=r"^corpus must be a path .* got int$"):
        sirerag.Index.build(42, tmp_path / "a", trees=[])
    with pytest.raises(InputError, match=r"^corpus: empty corpus \(no documents\)$"):
        sirerag.Index.build([], tmp_path / "b", trees=[])
    with pytest.raises(TypeError, match=r"^out must be a path \(str or pathlib.Path\), got int$"):
        sirerag.Index.build(ROWS, 42, trees=[])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # no cache/ left behind
    rows = [{"id": "a", "title": "Harwick\x00 Bridge", "text": "The Harwick Bridge was designed by\x00 Margaret Lowe."},
            dict(ROWS[1])]
    with sirerag.Index.build(rows, tmp_path / "c", trees=[]) as built:
        docs = {d.id: d for d in built.documents()}
        assert sorted(docs) == ["a", "elm"]
        assert (docs["a"].title, docs["a"].text) == ("Harwick Bridge", "The Harwick Bridge was designed by Margaret Lowe.")
        assert built.search("Margaret Lowe", k=1, retriever="bm25")[0].passages == ("a",)
        report = built.add([sirerag.core.types.Document(id="okavango", text=ROWS[2]["text"], title=ROWS[2]["title"])])
        assert report.changed and len(built) == 3


def test_a_nul_in_a_query_is_removed_as_in_a_corpus(index, caplog):
    with caplog.at_level("WARNING", logger="sirerag.api_checks"):
        dirty = index.search("Harwick\x00 Bridge\x1b[2J", k=3, retriever="bm25")
    assert "removed 2 control character(s) from the query" in caplog.text  # the NUL and the escape
    assert [r.entry_id for r in dirty] == [r.entry_id for r in index.search("Harwick Bridge[2J", k=3, retriever="bm25")]
    with pytest.raises(InputError, match=r"^query must be a question or keywords, got ''$"):
        index.search("\x00\x00")


def test_queries_over_the_limit_are_refused_everywhere_in_python(index):
    long = "bridge " * (LIMIT // 7 + 1)
    message = rf"^query is {len(long):,} characters long, over the limit of {LIMIT:,} \(query.max_chars\)$"
    with pytest.raises(InputError, match=message):
        index.search(long)
    with pytest.raises(InputError, match=message):
        index.ask(long, llm="openai:m@http://127.0.0.1:9/v1")
    with pytest.raises(InputError, match=rf"^query 2 is {len(long):,} characters long"):
        index.search_many(["bridge", long])
    _untouched(index)
    assert index.search("x" * LIMIT, k=1, retriever="bm25") is not None  # at the limit: searched
    index.query = QueryConfig(max_chars=10)
    with pytest.raises(InputError, match=r"^query is 11 characters long, over the limit of 10 \(query.max_chars\)$"):
        index.search("x" * 11)
    index.query = QueryConfig(max_chars=0)
    with pytest.raises(ConfigError, match=r"^query.max_chars must be a positive number of characters, got 0$"):
        index.search("bridge")


def test_the_framework_retrievers_refuse_bad_queries_and_settings(index_dir):
    from sirerag.integrations.langchain import SireragRetriever as LangChainRetriever
    from sirerag.integrations.llama_index import SireragRetriever as LlamaIndexRetriever

    chain = LangChainRetriever(index=index_dir, k=1)
    with pytest.raises(TypeError, match=r"^query must be a str \(a question or keywords\), got int$"):
        chain.invoke(123)
    with pytest.raises(InputError, match=rf"over the limit of {LIMIT:,} \(query.max_chars\)$"):
        chain.invoke("x" * (LIMIT + 1))
    with pytest.raises(ValueError, match=r"k must be a positive integer, got 0"):
        LangChainRetriever(index=index_dir, k=0)
    llama = LlamaIndexRetriever(index_dir, similarity_top_k=1)
    with pytest.raises(InputError, match=rf"over the limit of {LIMIT:,} \(query.max_chars\)$"):
        llama.retrieve("x" * (LIMIT + 1))
    with pytest.raises(ConfigError, match=r"^similarity_top_k must be a positive integer, got 'x'$"):
        LlamaIndexRetriever(index_dir, similarity_top_k="x")
    with pytest.raises(TypeError, match=r"^retriever must be a retriever name"):
        LlamaIndexRetriever(index_dir, retriever=5)


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("stdin", ["", "\n  \n\t\n"])
def test_search_with_no_query_on_stdin_says_so(index_dir, capsys, monkeypatch, stdin):
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    assert main(["search", str(index_dir), "-"]) == 1
    assert "no query: the input holds no non-blank line" in _error(capsys)


def test_the_command_line_cleans_and_caps_queries(index_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Harwick\x00 Bridge\n"))
    assert main(["search", str(index_dir), "-", "-k", "1", "--json", "--retriever", "bm25"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["query"] == "Harwick Bridge" and "removed 1 character(s)" in captured.err
    long = "x" * (LIMIT + 1)
    assert main(["search", str(index_dir), long]) == 1
    assert f"query is {LIMIT + 1:,} characters long, over the limit of {LIMIT:,} (query.max_chars)" in _error(capsys)
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"bridge\n{long}\n"))
    assert main(["search", str(index_dir), "-"]) == 1
    assert f"query on line 2 is {LIMIT + 1:,} characters long" in _error(capsys)
    assert main(["ask", str(index_dir), long, "--llm", "openai:m@http://127.0.0.1:9/v1"]) == 1
    assert f"over the limit of {LIMIT:,} (query.max_chars)" in _error(capsys)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": "bridge?", "answers": [], "gold_passage_ids": []}) + "\n"
                         + json.dumps({"question": long, "answers": [], "gold_passage_ids": []}) + "\n")
    assert main(["eval", str(index_dir), "--questions", str(questions)]) == 1
    assert f"questions.jsonl: question row 2: 'question' is {LIMIT + 1:,} characters long" in _error(capsys)
