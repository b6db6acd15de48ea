"""LLM calls on an engine: requests go out in batches to workers that each hold a backend.

:class:`EngineLLM` is a streaming backend for :class:`~sirerag.llm.cache.CachedLLM`: the
cache looks every request up on the driver first and hands only the misses here, then
stores each result as its batch comes back, so workers never touch the SQLite cache and a
rerun makes no call. Batch ``i`` goes to endpoint ``i mod n`` of the endpoints that
answered when the backend was created (``openai:MODEL@URL1,URL2``); an endpoint that does
not answer then is left out with a warning. Requests and completions travel as JSON.
"""
from __future__ import annotations

import logging
import urllib.error
import urllib.request
from typing import Any, Iterator, Sequence

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.engine import Engine
from sirerag.llm.backend import make_backend
from sirerag.llm.base import Completion, LLMCallError, LLMRequest, StreamingLLM, TransientLLMError
from sirerag.llm.http import public_url

logger = logging.getLogger(__name__)

#: seconds to wait for an endpoint's ``/models`` answer when checking it
PROBE_TIMEOUT = 5.0


def request_to_json(request: LLMRequest) -> dict[str, Any]:
    return {"messages": [list(m) for m in request.messages], "max_tokens": request.max_tokens,
            "temperature": request.temperature, "json_mode": request.json_mode,
            "prompt_version": request.prompt_version}


def request_from_json(data: dict[str, Any]) -> LLMRequest:
    return LLMRequest(messages=tuple((role, content) for role, content in data["messages"]),
                      max_tokens=int(data["max_tokens"]), temperature=float(data["temperature"]),
                      json_mode=bool(data["json_mode"]), prompt_version=str(data["prompt_version"]))


class LLMWorker:
    """A worker factory: loads one backend per spec (no cache) where it runs.

    Items are ``{"e": endpoint index, "r": request}``; results are ``{"c": completion}``
    or ``{"error": message, "transient": bool}``, one per item, in order.
    """

    def __init__(self, specs: Sequence[str], config: LLMConfig) -> None:
        self.specs, self.config = tuple(specs), config

    def __call__(self):  # noqa: ANN204 - a Worker
        backends: dict[int, Any] = {}

        def run(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = [{} for _ in items]
            for endpoint in sorted({int(item["e"]) for item in items}):
                if endpoint not in backends:
                    backends[endpoint] = make_backend(self.specs[endpoint], self.config)
                positions = [i for i, item in enumerate(items) if int(item["e"]) == endpoint]
                results = backends[endpoint].complete_many([request_from_json(items[i]["r"]) for i in positions],
                                                           return_exceptions=True)
                for i, result in zip(positions, results):
                    out[i] = _result_to_json(result)
            return out

        return run


def _result_to_json(result: Completion | LLMCallError) -> dict[str, Any]:
    if isinstance(result, LLMCallError):
        return {"error": str(result), "transient": isinstance(result, TransientLLMError)}
    return {"c": {"text": result.text, "prompt_tokens": result.prompt_tokens,
                  "completion_tokens": result.completion_tokens, "finish_reason": result.finish_reason}}


def _result_from_json(data: dict[str, Any]) -> Completion | LLMCallError:
    if "c" in data:
        c = data["c"]
        return Completion(text=c["text"], prompt_tokens=int(c["prompt_tokens"]),
                          completion_tokens=int(c["completion_tokens"]), finish_reason=c["finish_reason"])
    return (TransientLLMError if data.get("transient") else LLMCallError)(str(data.get("error", "no result")))


class EngineLLM(StreamingLLM):
    """Sends requests to an engine's workers in batches of ``batch_size``.

    Args:
        spec: the backend spec as the cache keys it (``openai:MODEL``, ``hf:...``).
        model: the model name (part of the cache key, as for the wrapped backend).
        worker_specs: one loadable spec per endpoint (``openai:MODEL@URL`` each), or one.
        config: the ``[llm]`` settings each worker's backend uses.
        engine: where the batches run.
        batch_size: requests per batch.
    """

    spec: str  # an attribute here, a read-only property in the other backends

    def __init__(self, spec: str, model: str, worker_specs: Sequence[str], *, config: LLMConfig, engine: Engine,
                 batch_size: int) -> None:
        self.spec, self.model = spec, model
        self.worker_specs = tuple(worker_specs)
        self.config, self.engine, self.batch_size = config, engine, batch_size
        #: how many requests callers should send at once so every worker gets batches
        self.preferred_slice = max(32, batch_size * engine.actors * 8)

    def iter_complete(self, requests: Sequence[LLMRequest]) -> Iterator[tuple[int, Completion | LLMCallError]]:
        if not requests:
            return
        n = len(self.worker_specs)
        starts = list(range(0, len(requests), self.batch_size))
        batches = [[{"e": b % n, "r": request_to_json(r)} for r in requests[s:s + self.batch_size]]
                   for b, s in enumerate(starts)]
        worker = LLMWorker(self.worker_specs, self.config)
        for index, results in self.engine.map_batches(worker, batches, label=f"LLM calls ({self.spec})"):
            for offset, data in enumerate(results):
                yield starts[index] + offset, _result_from_json(data)


def live_endpoints(model: str, urls: Sequence[str]) -> list[str]:
    """The URLs whose ``/models`` answers (any HTTP status counts), warning about the others.

    Raises:
        ConfigError: none of them answers.
    """
    live = []
    for url in urls:
        problem = _probe(url)
        if problem is None:
            live.append(url)
        else:
            logger.warning("LLM endpoint %s is down (%s); its share of the calls goes to the other endpoint(s)",
                           public_url(url), problem)
    if not live:
        raise ConfigError(f"every LLM endpoint of openai:{model} is down: "
                          + ", ".join(public_url(u) for u in urls))
    return live


def _probe(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=PROBE_TIMEOUT):
            return None
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))
