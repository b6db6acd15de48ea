"""``sirerag mcp INDEX [--llm SPEC]``: an index as an MCP server over stdio, for agents (extra ``mcp``).

A thin layer over :func:`sirerag.serve.mcp_server.run_stdio`: tools ``search`` and ``ask`` (with ``--llm``), the
index's statistics as the resource ``sirerag://stats``. An MCP client starts it as a command, e.g.
``{"command": "sirerag", "args": ["mcp", "/path/to/index"]}``. Logging goes to stderr; stdout is the protocol's.
"""
from __future__ import annotations

import argparse

from sirerag.cli.common import Subparsers, add_common


def register(sub: Subparsers) -> None:
    p = sub.add_parser("mcp", help="serve an index to agents over MCP (stdio)",
                       description="Serve an index as an MCP server over stdin/stdout: tools search and ask, "
                                   "resource sirerag://stats. A build, add or remove that replaces the index is "
                                   "picked up between calls.")
    p.add_argument("index", help="index directory written by sirerag build")
    p.add_argument("--llm", metavar="SPEC", help="the reader of the ask tool, e.g. openai:MODEL@URL or hf:smollm2")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sirerag.core.config.serve import ServeConfig

    config = ServeConfig(llm=args.llm).validate()
    if config.llm is not None:
        from sirerag.llm.factory import parse_spec

        parse_spec(config.llm)
    from sirerag.serve.mcp_server import run_stdio

    run_stdio(args.index, config)
    return 0
