"""The model servers a build or an update will call, checked before any work
(:mod:`sirerag.llm.probe`): a server that is down or is not an OpenAI-compatible endpoint
stops the command in seconds, before the embedder loads."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from sirerag.core.config import BuildConfig, LLMConfig

if TYPE_CHECKING:
    from sirerag.llm.probe import Endpoint

#: seconds the embedding endpoint may take to answer the check (the OpenAI embedder's request timeout)
EMBED_TIMEOUT = 60.0
#: how errors name each spec (the command-line option; a config file sets the same field)
LLM_OPTION, EXTRACTOR_OPTION, EMBEDDER_OPTION = "--llm", "--extractor-llm", "--embedder"


def endpoints_of(config: BuildConfig) -> list[Endpoint]:
    """The ``openai:`` servers a build with ``config`` calls (``--llm``, ``--extractor-llm``, ``--embedder``):
    the spec's URLs, else the URL from the environment, else OpenAI's API."""
    from sirerag.llm.http import split_openai_spec
    from sirerag.llm.probe import OPENAI_API, Endpoint

    out = []
    llm_specs = [(LLM_OPTION, config.llm.spec)]
    if config.extraction.extractor == "llm":
        llm_specs.append((EXTRACTOR_OPTION, config.extraction.llm or config.llm.spec))
    for option, spec in llm_specs:
        endpoint = llm_endpoint(option, spec, config.llm)
        if endpoint is not None:
            out.append(endpoint)
    spec = config.embedder.spec
    if spec.startswith("openai:"):
        from sirerag.embedding.openai import BASE_URL_ENV, DEFAULT_MODEL, KEY_ENV

        model, url = split_openai_spec(spec.partition(":")[2], default_model=DEFAULT_MODEL, option=EMBEDDER_OPTION)
        urls = (url or os.environ.get(BASE_URL_ENV) or OPENAI_API,)
        out.append(Endpoint(EMBEDDER_OPTION, "embeddings", model, urls, KEY_ENV, EMBED_TIMEOUT))
    return out


def llm_endpoint(option: str, spec: str | None, llm: LLMConfig, *, timeout: float | None = None) -> Endpoint | None:
    """The :class:`~sirerag.llm.probe.Endpoint` an ``openai:`` LLM spec calls (None for another backend):
    the spec's URLs, else the URL from ``llm.base_url_env``, else OpenAI's API; the check waits ``timeout``
    seconds (default ``llm.timeout``)."""
    from sirerag.llm.factory import parse_spec
    from sirerag.llm.probe import OPENAI_API, Endpoint

    if not spec or not spec.startswith("openai:"):
        return None
    parsed = parse_spec(spec, option=option)
    urls = parsed.base_urls or (os.environ.get(llm.base_url_env) or OPENAI_API,)
    return Endpoint(option, "chat", parsed.model, urls, llm.api_key_env,
                    float(llm.timeout if timeout is None else timeout))


def check_endpoints(config: BuildConfig) -> None:
    """Every server of :func:`endpoints_of` answers a cheap request, before any model loads or any
    text is embedded; ConfigError (one line naming the option and the endpoint) otherwise."""
    from sirerag.llm.probe import check_endpoints as probe

    probe(endpoints_of(config))
