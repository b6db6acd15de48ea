"""The HTTP server of ``sirerag serve`` (FastAPI; extra ``serve``): search and ask several indexes by name.

:func:`create_app` makes the ASGI app, :func:`serve` runs it on uvicorn. Routes: ``POST /search``,
``POST /ask``, ``GET /indexes``, ``GET /indexes/{name}/stats``, ``GET /health`` and FastAPI's own
``/openapi.json`` and ``/docs``. Searches, loads and statistics run in a pool of worker threads (one per core
by default), never on the event loop. Every error is ``{"error": "one line"}``, the line ``sirerag`` prints,
with its status: 400 bad input, 401 no or wrong key, 404 unknown index, 413 body too large, 502 the reader
failed, 503 the index is being written or changed twice under a request.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping, TypeVar

from sirerag.core.config.serve import API_KEY_ENV, ServeConfig
from sirerag.core.errors import (ConfigError, IndexChangedError, IndexLockedError, InputError, SireragError, check,
                                 require)
from sirerag.serve.guards import LimitBody, RequireKey
from sirerag.serve.indexes import (IndexSet, UnknownIndexError, check_bind, check_options, check_queries,
                                   load_reader)

require("fastapi", "serve", purpose="sirerag serve")

from fastapi import FastAPI  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402
from starlette.requests import Request  # noqa: E402

from sirerag.serve import schemas  # noqa: E402

if TYPE_CHECKING:
    from sirerag.llm.base import LLM

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: status of each error type, the first that matches
STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (UnknownIndexError, 404), (InputError, 400), (ConfigError, 400), (IndexLockedError, 503),
    (IndexChangedError, 503),
)
ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": schemas.Error}
                                           for status in (400, 401, 404, 413, 500, 502, 503)}


def status_of(exc: BaseException) -> int:
    from sirerag.llm.base import LLMCallError

    if isinstance(exc, LLMCallError):
        return 502
    return next((status for kind, status in STATUS if isinstance(exc, kind)), 500)


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(indexes: Mapping[str, str | Path] | IndexSet, config: ServeConfig | None = None, *,
               api_key: str | None = None, reader: LLM | None = None) -> FastAPI:
    """The server's ASGI app over ``indexes`` (``{name: folder}``, loaded now).

    Args:
        indexes: the indexes by name.
        config: bounds and the ``/ask`` reader's spec (default :class:`ServeConfig`).
        api_key: every route but ``/health`` needs it (None: no key asked).
        reader: a loaded LLM for ``/ask`` instead of ``config.llm``.

    Raises:
        ConfigError: a bad setting or reader spec. IndexFormatError: an index does not load.
    """
    from sirerag.cli.main import _one_line
    from sirerag.embedding import usable_cores

    config = (config or ServeConfig()).validate()
    check(api_key is None or len(api_key) > 0, "api_key", api_key, "a non-empty string or None")
    if api_key is not None:
        check_bind(config.host, api_key, env=API_KEY_ENV)
    reader = reader if reader is not None else load_reader(config.llm)
    served = indexes if isinstance(indexes, IndexSet) else IndexSet(indexes, max_retrievers=config.max_retrievers)
    workers = config.workers or usable_cores()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sirerag-serve")
    # a local model generates one answer at a time; an HTTP reader takes parallel requests
    reader_lock = threading.Lock() if reader is not None and not str(reader.spec).startswith("openai:") else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        pool.shutdown(wait=True)
        served.close()

    app = FastAPI(title="sirerag", summary="Search and ask sirerag indexes.", lifespan=lifespan, responses=ERRORS)
    app.state.indexes, app.state.config, app.state.workers = served, config, workers

    async def off_loop(work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, work)

    @app.exception_handler(SireragError)
    @app.exception_handler(OSError)
    async def library_error(_: Request, exc: Exception) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            logger.warning("%s: %s", type(exc).__name__, _one_line(exc))
        return error(status, _one_line(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}" for e in exc.errors()]
        return error(400, "; ".join(parts))

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception) -> JSONResponse:
        logger.error("internal error", exc_info=exc)
        return error(500, f"internal error ({type(exc).__name__}); see the server's log")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Answers without the API key: the server is up, and what it serves."""
        import sirerag

        return {"status": "ok", "sirerag": sirerag.__version__, "indexes": sorted(served.served)}

    @app.get("/indexes", response_model=dict[str, list[schemas.IndexInfo]])
    async def list_indexes() -> dict[str, Any]:
        """The served indexes: name, commit, size, trees, graph and embedder."""
        rows = await off_loop(lambda: [one.run(partial(_info, name))[1] for name, one in served.served.items()])
        return {"indexes": rows}

    @app.get("/indexes/{name}/stats")
    async def stats(name: str) -> dict[str, Any]:
        """``sirerag stats --json`` of the index, with the commit it describes."""
        from sirerag.report.stats import index_stats

        index, result = await off_loop(lambda: served.get(name).run(lambda index: index_stats(index.loaded)))
        return {"name": name, "commit": index.loaded.commit, **result}

    @app.post("/search", responses={200: {"model": schemas.SearchResponse}})
    async def search(body: schemas.SearchRequest) -> JSONResponse:
        """The ``k`` best entries for one query or a batch, all from one commit (``commit``)."""
        from sirerag.retrievers.pool_rank import describe

        if (body.query is None) == (body.queries is None):
            raise InputError("give either query (one) or queries (a batch)")
        queries = [body.query] if body.query is not None else list(body.queries or [])
        check_queries(queries, body.k, config)
        check_options(body.options)
        target = served.get(body.index)

        def work(index: Any) -> tuple[dict[str, Any], list[Any]]:
            ranking = describe(target.retriever(index, body.retriever, body.options))
            with target.serialised(body.retriever):
                return ranking, index.search_many(queries, k=body.k, retriever=body.retriever, **body.options)

        index, (ranking, results) = await off_loop(lambda: target.run(work))
        return JSONResponse({"index": target.name, "commit": index.loaded.commit, "k": body.k, "ranking": ranking,
                             "results": [{"query": q, "hits": [{"rank": n, **hit.to_dict()}
                                                               for n, hit in enumerate(hits, start=1)]}
                                         for q, hits in zip(queries, results)]})

    @app.post("/ask", responses={200: {"model": schemas.AskResponse}})
    async def ask(body: schemas.AskRequest) -> JSONResponse:
        """The reader's answer from the ``k`` best entries, with the entries it read as sources."""
        if reader is None:
            raise InputError("this server has no reader: start it with --llm SPEC to answer /ask")
        check_queries([body.question], body.k, config)
        check(1 <= body.token_budget <= config.max_token_budget, "token_budget", body.token_budget,
              f"an integer from 1 to {config.max_token_budget} (serve.max_token_budget)")
        check(1 <= body.max_tokens <= config.max_answer_tokens, "max_tokens", body.max_tokens,
              f"an integer from 1 to {config.max_answer_tokens} (serve.max_answer_tokens)")
        check_options(body.options)
        target = served.get(body.index)

        def work(index: Any) -> Any:
            target.retriever(index, body.retriever, body.options)
            with target.serialised(body.retriever), reader_lock or nullcontext():
                return index.ask(body.question, reader, k=body.k, retriever=body.retriever,
                                 token_budget=body.token_budget, max_tokens=body.max_tokens, **body.options)

        index, answer = await off_loop(lambda: target.run(work))
        return JSONResponse({"index": target.name, "commit": index.loaded.commit, **answer.to_dict()})

    app.add_middleware(LimitBody, max_bytes=config.max_body_bytes)
    if api_key is not None:
        app.add_middleware(RequireKey, api_key=api_key)
    return app


def _info(name: str, index: Any) -> dict[str, Any]:
    manifest = index.manifest
    return {"name": name, "commit": index.loaded.commit, "entries": len(index), "documents": manifest.documents,
            "trees": list(manifest.trees), "graph": index.loaded.component("graph") is not None,
            "embedder": manifest.embedder.spec if manifest.embedder is not None else None}


def serve(indexes: Mapping[str, str | Path], config: ServeConfig | None = None, *, api_key: str | None = None,
          access_log: bool = False) -> None:
    """Serve ``indexes`` on ``config.host``:``config.port`` (uvicorn) until SIGINT or SIGTERM. The socket is bound
    and listening before the log line ``serving ... on http://HOST:PORT`` (the port the system chose for 0).

    Raises:
        ConfigError: a host beyond loopback without ``api_key``, a short key, a bad setting.
        OSError: the address cannot be bound.
    """
    import socket

    require("uvicorn", "serve", purpose="sirerag serve")
    import uvicorn

    config = (config or ServeConfig()).validate()
    check_bind(config.host, api_key, env=API_KEY_ENV)
    app = create_app(indexes, config, api_key=api_key)
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host.strip("[]"), config.port))
    sock.listen(2048)
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if family == socket.AF_INET6 else host
    logger.info("serving %s on http://%s:%d (%d worker threads)", ", ".join(app.state.indexes.served), where, port,
                app.state.workers)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=access_log, lifespan="on"))
    server.run(sockets=[sock])
