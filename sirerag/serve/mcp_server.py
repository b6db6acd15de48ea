"""The MCP server of ``sirerag mcp INDEX`` (the ``mcp`` package 2.x, extra ``mcp``): an index for agents, over stdio.

Tools: ``search`` (the ``k`` best entries for a query) and ``ask`` (the reader's answer, when the server was
started with an LLM). Resource: ``sirerag://stats``, the index's ``sirerag stats --json``. Every call reads one
commit of the index (the folder's newest, picked up between calls; :class:`~sirerag.serve.indexes.ServedIndex`)
in a worker thread, and says which commit it read; the bounds are those of the HTTP server
(:class:`~sirerag.core.config.serve.ServeConfig`). A bad argument is a tool error with the line ``sirerag``
prints. stdout carries the protocol: nothing else may write there (the library never prints).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

from sirerag.core.config.serve import ServeConfig
from sirerag.core.errors import InputError, SireragError, require
from sirerag.serve.indexes import ServedIndex, check_options, check_queries, load_reader

if TYPE_CHECKING:
    from sirerag.llm.base import LLM

require("mcp.server.mcpserver", "mcp", purpose="sirerag mcp")

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ResourceError, ToolError  # noqa: E402

STATS_URI = "sirerag://stats"


@contextmanager
def told(kind: type[Exception]) -> Iterator[None]:
    """A library error in the block reaches the client as ``kind`` (MCP's anticipated failure) with the line
    ``sirerag`` prints; anything else stays a crash, whose text the SDK keeps on the server."""
    from sirerag.cli.main import _one_line

    try:
        yield
    except (SireragError, OSError) as exc:
        raise kind(_one_line(exc)) from exc


def create_server(served: ServedIndex, config: ServeConfig | None = None, *, reader: LLM | None = None) -> MCPServer:
    """The MCP server over ``served``; ``reader`` (a loaded LLM) or ``config.llm`` answers ``ask``."""
    import anyio

    config = (config or ServeConfig()).validate()
    reader = reader if reader is not None else load_reader(config.llm)
    server = MCPServer("sirerag", instructions=f"Search the sirerag index {served.name!r}: 'search' returns its best "
                                             "entries (text, title, source passages) for a query"
                                             + ("; 'ask' answers a question from them" if reader else "") + ".")

    async def off_loop(work: Any) -> Any:
        return await anyio.to_thread.run_sync(lambda: served.run(work))

    @server.tool()
    async def search(query: str, k: int = 10, retriever: Optional[str] = None,
                     options: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """The k best entries of the index for the query, best first: each with its text, title, kind (leaf:
        a passage; summary or aggregate: several) and source passage ids. retriever: dense, bm25, ppr or a
        fusion such as dense+bm25 (default: the index's). options: linking, pool_rule, leaf_share..."""
        options = dict(options or {})

        def work(index: Any) -> list[Any]:
            served.retriever(index, retriever, options)
            with served.serialised(retriever):
                return index.search(query, k=k, retriever=retriever, **options)

        with told(ToolError):
            check_queries([query], k, config)
            check_options(options)
            index, hits = await off_loop(work)
        return {"index": served.name, "commit": index.loaded.commit, "query": query,
                "hits": [{"rank": n, **hit.to_dict()} for n, hit in enumerate(hits, start=1)]}

    @server.tool()
    async def ask(question: str, k: int = 10, retriever: Optional[str] = None) -> dict[str, Any]:
        """Answer the question from the index's k best entries with the server's reader; returns the answer and
        the entries it read as numbered sources."""
        def work(index: Any) -> Any:
            served.retriever(index, retriever, {})
            with served.serialised(retriever):
                return index.ask(question, reader, k=k, retriever=retriever)

        with told(ToolError):
            if reader is None:
                raise InputError("this server has no reader: start it with --llm SPEC to answer ask")
            check_queries([question], k, config)
            index, answer = await off_loop(work)
        return {"index": served.name, "commit": index.loaded.commit, **answer.to_dict()}

    @server.resource(STATS_URI, name="stats", description="the index's statistics (sirerag stats --json)",
                     mime_type="application/json")
    async def stats() -> str:
        from sirerag.report.stats import index_stats

        with told(ResourceError):
            index, result = await off_loop(lambda index: index_stats(index.loaded))
        return json.dumps({"name": served.name, "commit": index.loaded.commit, **result}, ensure_ascii=False)

    return server


def run_stdio(path: str | Path, config: ServeConfig | None = None) -> None:
    """Serve the index folder ``path`` over stdin and stdout until the client closes them.

    Raises:
        IndexFormatError: the index does not load. ConfigError: a bad setting or reader spec.
    """
    config = (config or ServeConfig()).validate()
    name = Path(path).resolve().name or "index"
    served = ServedIndex(name, path, max_retrievers=config.max_retrievers)
    try:
        create_server(served, config).run("stdio")
    finally:
        served.close()
