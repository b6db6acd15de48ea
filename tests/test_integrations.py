"""The llama-index and LangChain retrievers (sirerag.integrations), against the real packages of the
``llamaindex`` and ``langchain`` extras (in the test lock, so these always run): each returns its framework's
result type with the provenance as metadata, answers one query end to end through the framework's own query
engine / runnable chain with its fake LLM, and a missing framework is an ImportError naming the extra."""
from __future__ import annotations

import importlib
import sys

import pytest
from _tiny_index import QUESTION, build_tiny_index

import sirerag
from sirerag.core.errors import MissingExtraError


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("integrations"))


def test_llama_index_retriever_returns_nodes_with_provenance(index_dir):
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import MetadataMode, NodeWithScore

    from sirerag.integrations.llama_index import SireragRetriever

    retriever = SireragRetriever(str(index_dir), similarity_top_k=2, retriever="dense")
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 2 and all(isinstance(n, NodeWithScore) for n in nodes)
    best = nodes[0]
    expected = sirerag.Index.load(index_dir).search(QUESTION, k=2, retriever="dense")
    assert [n.node.node_id for n in nodes] == [r.entry_id for r in expected]
    assert best.score == pytest.approx(expected[0].score)
    assert best.node.metadata == {"entry_id": expected[0].entry_id, "title": "Harwick Bridge", "section": "",
                                  "tree": "similarity", "kind": "leaf", "level": 0, "passages": ["harwick"],
                                  "index": str(index_dir)}
    assert best.node.get_content(metadata_mode=MetadataMode.LLM) == expected[0].text  # no metadata repeated


def test_llama_index_query_engine_answers_through_the_retriever(index_dir):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from sirerag.integrations.llama_index import SireragRetriever

    with sirerag.Index.load(index_dir) as index:
        engine = RetrieverQueryEngine.from_args(SireragRetriever(index, similarity_top_k=1, retriever="bm25"),
                                                llm=MockLLM())
        response = engine.query(QUESTION)
    assert [n.node.metadata["passages"] for n in response.source_nodes] == [["harwick"]]
    # MockLLM answers with the prompt it was given: the engine put our passage in its context
    assert "The Harwick Bridge was designed by Margaret Lowe in 1901." in str(response)
    assert QUESTION in str(response)


def test_langchain_retriever_returns_documents_with_provenance(index_dir):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from sirerag.integrations.langchain import SireragRetriever

    retriever = SireragRetriever(index=index_dir, k=2)  # the index's default retriever (dense)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    assert docs[0].page_content.endswith("designed by Margaret Lowe in 1901.")
    assert docs[0].metadata["title"] == "Harwick Bridge" and docs[0].metadata["passages"] == ["harwick"]
    assert docs[0].metadata["score"] >= docs[1].metadata["score"] and docs[0].id == docs[0].metadata["entry_id"]
    with pytest.raises(TypeError, match="expected a sirerag.Index or an index directory, got int"):
        SireragRetriever(index=3)


def test_langchain_chain_answers_through_the_retriever(index_dir):
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from sirerag.integrations.langchain import SireragRetriever

    prompts: list[str] = []

    def keep(prompt):
        prompts.append(prompt.to_string())
        return prompt

    retriever = SireragRetriever(index=sirerag.Index.load(index_dir), k=1, retriever="bm25")
    chain = ({"context": retriever | (lambda docs: "\n\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()}
             | ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
             | RunnableLambda(keep) | FakeListChatModel(responses=["Margaret Lowe"]) | StrOutputParser())
    assert chain.invoke(QUESTION) == "Margaret Lowe"
    assert len(prompts) == 1 and "Harwick Bridge\nThe Harwick Bridge was designed by Margaret Lowe" in prompts[0]


@pytest.mark.parametrize("module", ["sirerag.integrations.llama_index", "sirerag.integrations.langchain"])
def test_an_adapter_closes_the_index_it_opened_and_not_one_it_was_given(index_dir, module):
    adapter_class = importlib.import_module(module).SireragRetriever

    def make(index):
        return adapter_class(index, retriever="dense") if "llama" in module else \
            adapter_class(index=index, retriever="dense")

    with make(str(index_dir)) as adapter:  # opened from a path: the adapter's to close
        loaded = adapter.index.retriever("dense")
        assert adapter.index.retriever("dense") is loaded  # kept while open
    assert adapter.index.retriever("dense") is not loaded  # closed: the next search loads it again
    with sirerag.Index.load(index_dir) as given:
        loaded = given.retriever("dense")
        with make(given) as adapter:
            assert adapter.index is given
        assert given.retriever("dense") is loaded  # the caller's index stays open
        adapter.close()  # twice is harmless


@pytest.mark.parametrize("module, framework, extra", [
    ("sirerag.integrations.llama_index", "llama_index.core", "llamaindex"),
    ("sirerag.integrations.langchain", "langchain_core", "langchain"),
])
def test_a_missing_framework_names_the_extra(monkeypatch, module, framework, extra):
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, framework, None)  # import of the framework fails
    with pytest.raises(MissingExtraError, match=rf"pip install 'sirerag\[{extra}\]'") as raised:
        importlib.import_module(module)
    assert isinstance(raised.value, ImportError)


def test_the_core_never_imports_the_integrations():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = ("import sys, sirerag, sirerag.api, sirerag.cli.main, sirerag.cli.search, sirerag.cli.ask\n"
            "print(sorted(m for m in sys.modules if m.startswith(('llama_index', 'langchain', "
            "'sirerag.integrations'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
