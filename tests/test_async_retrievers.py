"""The framework retrievers' async calls run the search in worker threads (issue 44, item 3): four concurrent
``aretrieve`` (llama-index) or ``ainvoke`` (LangChain) calls overlap, and the event loop keeps running while they
search. No timing: the search is held on a barrier of four that breaks (and fails the test) unless all four run
at once, and each search waits for a callback that only a free event loop can run."""
from __future__ import annotations

import asyncio
import threading

import pytest
from _tiny_index import QUESTION, build_tiny_index

import sirerag

QUERIES = [QUESTION, "Elm river", "Okavango Delta", "North Sea"]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("async"))


def gate_searches(index: sirerag.Index, monkeypatch: pytest.MonkeyPatch, loop_box: list,
                  timeout: float = 30) -> threading.Barrier:
    """Make ``index.search`` wait until four searches run together, each after the event loop ran a callback."""
    barrier = threading.Barrier(len(QUERIES), timeout=timeout)
    real = index.search

    def gated(*args, **kwargs):
        ran = threading.Event()
        loop_box[0].call_soon_threadsafe(ran.set)  # runs only if the loop is not stuck in a search
        assert ran.wait(timeout=timeout), "the event loop was blocked during a search"
        barrier.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(index, "search", gated)
    return barrier


async def _gather(calls):
    return await asyncio.gather(*calls)


def test_index_asearch_and_aask_run_in_worker_threads(index_dir, monkeypatch):
    index = sirerag.Index.load(index_dir)
    loop_box: list = [None]
    barrier = gate_searches(index, monkeypatch, loop_box)

    async def run():
        loop_box[0] = asyncio.get_running_loop()
        return await _gather([index.asearch(q, k=1, retriever="bm25") for q in QUERIES])

    results = asyncio.run(run())
    assert [r[0].passages for r in results] == [("harwick",), ("elm",), ("okavango",), ("elm",)]
    assert not barrier.broken
    monkeypatch.undo()

    class Reader:
        spec = "scripted"

        def complete(self, request):
            return type("Completion", (), {"text": "Answer: Margaret Lowe", "cached": False})()

    answer = asyncio.run(index.aask(QUESTION, Reader(), k=1, retriever="bm25"))
    assert answer.text == "Margaret Lowe" and answer.sources[0].passages == ("harwick",)


def test_llama_index_aretrieve_calls_overlap(index_dir, monkeypatch):
    from sirerag.integrations.llama_index import SireragRetriever

    index = sirerag.Index.load(index_dir)
    loop_box: list = [None]
    barrier = gate_searches(index, monkeypatch, loop_box)
    retriever = SireragRetriever(index, similarity_top_k=1, retriever="bm25")

    async def run():
        loop_box[0] = asyncio.get_running_loop()
        return await _gather([retriever.aretrieve(q) for q in QUERIES])

    nodes = asyncio.run(run())
    assert [n[0].node.metadata["passages"] for n in nodes] == [["harwick"], ["elm"], ["okavango"], ["elm"]]
    assert not barrier.broken


def test_langchain_ainvoke_calls_overlap(index_dir, monkeypatch):
    from sirerag.integrations.langchain import SireragRetriever

    index = sirerag.Index.load(index_dir)
    loop_box: list = [None]
    barrier = gate_searches(index, monkeypatch, loop_box)
    retriever = SireragRetriever(index=index, k=1, retriever="bm25")

    async def run():
        loop_box[0] = asyncio.get_running_loop()
        return await _gather([retriever.ainvoke(q) for q in QUERIES])

    docs = asyncio.run(run())
    assert [d[0].metadata["passages"] for d in docs] == [["harwick"], ["elm"], ["okavango"], ["elm"]]
    assert not barrier.broken


def test_a_search_on_the_event_loop_would_fail_the_gate(index_dir, monkeypatch):
    """The gate is a real test: the same four calls made on the loop itself break it."""
    index = sirerag.Index.load(index_dir)
    loop_box: list = [None]
    gate_searches(index, monkeypatch, loop_box, timeout=1)  # a blocked loop stays blocked: no need to wait long

    async def blocking(query):
        return index.search(query, k=1, retriever="bm25")  # on the loop: the loop callback cannot run

    async def run():
        loop_box[0] = asyncio.get_running_loop()
        return await _gather([blocking(q) for q in QUERIES])

    with pytest.raises(AssertionError, match="the event loop was blocked during a search"):
        asyncio.run(run())
