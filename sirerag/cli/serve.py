"""``sirerag serve INDEX... [--host 127.0.0.1] [--port 8000]``: search and ask indexes over HTTP (extra ``serve``).

A thin layer over :func:`sirerag.serve.app.serve`. Each INDEX is a folder (served under the folder's name) or
``NAME=FOLDER``. Listening beyond loopback needs an API key in ``SIRERAG_API_KEY``; with a key set, every
route but ``/health`` asks for it. docs/serve.md describes the routes and the limits.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from sirerag.cli.common import Subparsers, add_common

if TYPE_CHECKING:
    from pathlib import Path

    from sirerag.core.config.serve import ServeConfig


def register(sub: Subparsers) -> None:
    from sirerag.core.config.serve import API_KEY_ENV, ServeConfig

    defaults = ServeConfig()
    p = sub.add_parser("serve", help="serve indexes over HTTP (search, ask, stats)",
                       description="Serve indexes over HTTP: POST /search, POST /ask, GET /indexes, "
                                   "GET /indexes/NAME/stats, GET /health, /docs. A build, add or remove that "
                                   "replaces an index is picked up between requests.")
    p.add_argument("indexes", nargs="+", metavar="INDEX", help="index folder, or NAME=FOLDER (default name: the "
                                                                "folder's name)")
    p.add_argument("--host", default=defaults.host, help=f"address to listen on (default {defaults.host}); "
                                                         f"anything but loopback needs {API_KEY_ENV}")
    p.add_argument("--port", type=int, default=defaults.port, help=f"port (default {defaults.port}; 0: any free one)")
    p.add_argument("--llm", metavar="SPEC", help="the reader of POST /ask, e.g. openai:MODEL@URL or hf:smollm2")
    p.add_argument("--workers", type=int, default=defaults.workers,
                   help="threads that run searches (default 0: one per core)")
    p.add_argument("--max-k", type=int, default=defaults.max_k, help=f"k at most (default {defaults.max_k})")
    p.add_argument("--max-batch", type=int, default=defaults.max_batch,
                   help=f"queries per request at most (default {defaults.max_batch})")
    p.add_argument("--access-log", action="store_true", help="log every request")
    add_common(p)
    p.set_defaults(func=run)


def server_settings(args: argparse.Namespace) -> tuple[dict[str, Path], ServeConfig, str | None]:
    """The indexes by name, the :class:`ServeConfig` and the API key of the command's arguments and environment."""
    import os

    from sirerag.core.config.serve import API_KEY_ENV, ServeConfig
    from sirerag.serve.indexes import check_bind, parse_indexes

    config = ServeConfig(host=args.host, port=args.port, llm=args.llm, workers=args.workers, max_k=args.max_k,
                         max_batch=args.max_batch).validate()
    api_key = os.environ.get(API_KEY_ENV) or None
    check_bind(config.host, api_key, env=API_KEY_ENV)  # before any index is loaded
    if config.llm is not None:
        from sirerag.llm.factory import parse_spec

        parse_spec(config.llm)
    return parse_indexes(args.indexes), config, api_key


def run(args: argparse.Namespace) -> int:
    indexes, config, api_key = server_settings(args)
    from sirerag.serve.app import serve

    serve(indexes, config, api_key=api_key, access_log=args.access_log)
    return 0
