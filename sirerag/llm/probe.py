"""Endpoints checked before work: every ``openai:`` endpoint a command will call answers a cheap request first.

:func:`check_endpoint` asks ``GET URL/models`` (free on OpenAI and on llama.cpp, vLLM and
Ollama's compatible servers). A server that answers it with 2xx is up; 401/403 means the key
was refused; a server that does not list models (404, 405, 501) gets one minimal request
instead: a 1-token chat completion or the embedding of one word. A connection that is refused
(a server that is down: at once) or times out (the request timeout of the backend), or an answer that is not what the API answers, is a :class:`ConfigError` naming
the option and the endpoint (never the key), so a command stops in seconds, before any model
loads or any text is embedded.
"""
from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Iterable

from sirerag.core.errors import ConfigError
from sirerag.llm.http import public_url

logger = logging.getLogger(__name__)

#: seconds a probe waits for an answer by default (a busy local server may take the length of one generation;
#: a server that is down refuses the connection at once)
PROBE_TIMEOUT = 120.0
_BODY_CAP = 1 << 20
#: where ``openai:MODEL`` without a URL (and without ``OPENAI_BASE_URL``) sends its requests
OPENAI_API = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Endpoint:
    """One server a command will call: the option it came from, ``chat`` or ``embeddings``, the
    model, the URLs (several: calls are spread over those that answer) and the key's variable."""

    option: str
    kind: str
    model: str
    urls: tuple[str, ...]
    key_env: str = "OPENAI_API_KEY"
    timeout: float = PROBE_TIMEOUT


def _request(url: str, key: str | None, body: dict | None, timeout: float) -> tuple[int, bytes]:
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) checked by the spec parser
            return resp.status, resp.read(_BODY_CAP)
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _problem(endpoint: Endpoint, url: str, key: str | None) -> str | None:
    """Why ``url`` cannot serve ``endpoint`` (None: it answered as the API does)."""
    base = url.rstrip("/")
    try:
        status, _ = _request(base + "/models", key, None, endpoint.timeout)
        if 200 <= status < 300:
            return None
        if status in (401, 403):
            return f"the server refused the key (HTTP {status}); check {endpoint.key_env}"
        if endpoint.kind == "chat":
            body = {"model": endpoint.model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
            status, raw = _request(base + "/chat/completions", key, body, endpoint.timeout)
            field = "choices"
        else:
            status, raw = _request(base + "/embeddings", key, {"model": endpoint.model, "input": ["ping"]},
                                   endpoint.timeout)
            field = "data"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"connection error: {reason}" if not isinstance(reason, TimeoutError) else \
            f"no answer within {endpoint.timeout:g}s"
    if not 200 <= status < 300:
        return f"it is not an OpenAI-compatible {endpoint.kind} endpoint for {endpoint.model} (HTTP {status})"
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get(field), list) or not answer[field]:
        return f"it answered a {endpoint.kind} request without '{field}' (not an OpenAI-compatible server?)"
    return None


def check_endpoint(endpoint: Endpoint) -> list[str]:
    """The URLs of ``endpoint`` that answer; warns about the others when some do.

    Raises:
        ConfigError: none answers ("OPTION openai:MODEL at URL: what went wrong").
    """
    key = os.environ.get(endpoint.key_env) or None
    if key is None and endpoint.urls == (OPENAI_API,):
        raise ConfigError(f"{endpoint.option} openai:{endpoint.model} calls the paid OpenAI API and needs a key in "
                          f"the environment variable {endpoint.key_env}; for a local server use "
                          f"openai:{endpoint.model}@http://HOST:PORT/v1")
    live, problems = [], []
    for url in endpoint.urls:
        problem = _problem(endpoint, url, key)
        if problem is None:
            live.append(url)
            continue
        if key:
            problem = problem.replace(key, "***")
        problems.append(f"openai:{endpoint.model} at {public_url(url)}: {problem}")
    if not live:
        raise ConfigError(f"{endpoint.option} {'; '.join(problems)}; the endpoint must answer before any work "
                          "starts")
    for problem in problems:
        logger.warning("%s %s; its share of the calls goes to the other endpoint(s)", endpoint.option, problem)
    return live


def check_endpoints(endpoints: Iterable[Endpoint]) -> None:
    """:func:`check_endpoint` for each endpoint (each server once)."""
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    for endpoint in endpoints:
        key = (endpoint.kind, endpoint.model, endpoint.urls)
        if endpoint.urls and key not in seen:
            seen.add(key)
            check_endpoint(endpoint)
