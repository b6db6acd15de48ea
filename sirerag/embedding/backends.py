"""Make one embedder from a spec: no engine, no cache (:func:`sirerag.embedding.load_embedder` stacks those).

Specs: ``minilm`` (all-MiniLM-L6-v2 shipped with the ``local`` extra, on torch), ``minilm-onnx`` (the same
weights on ONNX Runtime), ``st:PATH_OR_NAME`` (any sentence-transformers model), ``openai:MODEL[@URL]``.
"""
from __future__ import annotations

from sirerag.embedding.base import Embedder
from sirerag.core.errors import check

SPEC_FORMS = "'minilm', 'minilm-onnx', 'st:PATH_OR_NAME', 'openai:MODEL' or 'openai:MODEL@URL'"


def parse_embedder_spec(spec: str) -> tuple[str, str]:
    """``(backend, rest)`` of an embedder spec (``minilm``, ``st``, ``openai``), loading nothing.

    Raises:
        ConfigError: the spec has none of the forms :func:`load_embedder` takes.
    """
    check(isinstance(spec, str) and bool(spec.strip()), "embedder spec", spec, SPEC_FORMS)
    backend, sep, rest = spec.strip().partition(":")
    if spec.strip() in ("minilm", "minilm-onnx"):
        return spec.strip(), ""
    check(backend == "openai" or (backend == "st" and bool(sep) and bool(rest.strip())), "embedder spec", spec,
          SPEC_FORMS)
    return backend, rest.strip() if backend == "st" else rest


def make_embedder(spec: str, *, batch_size: int = 64, show_progress: bool = False) -> Embedder:
    """The embedder ``spec`` names, uncached, in this process (what an engine's workers load).

    Raises:
        ConfigError: ``spec`` or ``batch_size`` is invalid, or an API key is missing.
        MissingExtraError: the backend's optional packages are not installed.
        SireragError: the MiniLM weights fail their sha256 check.
    """
    check(isinstance(batch_size, int) and batch_size > 0, "batch_size", batch_size, "a positive integer")
    backend, rest = parse_embedder_spec(spec)
    if backend == "minilm":
        from sirerag.embedding.sentence_transformers import load_minilm

        return load_minilm(batch_size=batch_size, show_progress=show_progress)
    if backend == "minilm-onnx":
        from sirerag.embedding.st_onnx import load_minilm_onnx

        return load_minilm_onnx("minilm-onnx", batch_size=batch_size, show_progress=show_progress)
    if backend == "st":
        from sirerag.embedding.sentence_transformers import load_sentence_transformer

        return load_sentence_transformer(rest, batch_size=batch_size, show_progress=show_progress)
    from sirerag.embedding.openai import DEFAULT_MODEL, OpenAIEmbedder
    from sirerag.http import split_openai_spec

    model, url = split_openai_spec(rest, default_model=DEFAULT_MODEL)
    return OpenAIEmbedder(model, base_url=url, batch_size=batch_size, show_progress=show_progress)
