"""Two ASGI guards in front of the server's routes: the API key and the request body's size.

Both answer with the server's JSON error (``{"error": "one line"}``) before a route runs: 401 for a missing or
wrong key (compared in constant time, :func:`~sirerag.serve.indexes.key_matches`), 413 for a body larger than
``serve.max_body_bytes`` (told by its ``Content-Length``, or counted as it arrives).
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from sirerag.serve.indexes import key_matches

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: paths answered without the key (a load balancer's probe)
OPEN_PATHS = frozenset({"/health"})


async def send_error(send: Send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    """Send ``{"error": message}`` with ``status``."""
    import orjson

    body = orjson.dumps({"error": message})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class RequireKey:
    """Answer 401 unless the request carries the API key, as ``Authorization: Bearer KEY`` or ``X-API-Key``."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app, self.api_key = app, api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        auth = _header(scope, b"authorization")
        given = auth[7:] if auth is not None and auth[:7].lower() == "bearer " else _header(scope, b"x-api-key")
        if not key_matches(given, self.api_key):
            what = "no API key" if given is None else "a wrong API key"
            return await send_error(send, 401, f"{what}: send it as 'Authorization: Bearer KEY'",
                                    {"WWW-Authenticate": "Bearer"})
        await self.app(scope, receive, send)


class LimitBody:
    """Answer 413 for a body over ``max_bytes``; a body within it is read whole, then handed to the route."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = f"the request body is larger than {self.max_bytes} bytes (serve.max_body_bytes)"
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await send_error(send, 413 if length.isdigit() else 400,
                                    too_big if length.isdigit() else f"bad Content-Length {length!r}")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return await send_error(send, 413, too_big)
            if not message.get("more_body", False):
                break
        body, sent = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # after the body: the disconnect
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
