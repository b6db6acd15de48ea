"""Serving indexes to other processes: an HTTP server (:mod:`sirerag.serve.app`, extra ``serve``, the command
``sirerag serve``) and an MCP server over stdio (:mod:`sirerag.serve.mcp_server`, extra ``mcp``, the command
``sirerag mcp``).

Both sit in the front layer beside the command line; both hold their indexes through
:class:`~sirerag.serve.indexes.ServedIndex`, which hands each request one commit and picks up a swap (a build,
add or remove) between requests. Importing a server module without its extra raises
:class:`~sirerag.core.errors.MissingExtraError` naming the extra.
"""
