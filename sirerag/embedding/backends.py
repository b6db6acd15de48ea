"""Make one embedder from a spec: no engine, no cache (:func:`sirerag.embedding.load_embedder` stacks those).

Specs: ``minilm`` (all-MiniLM-L6-v2 shipped with the ``local`` extra, on torch), ``minilm-onnx`` (the same
weights on ONNX Runtime), ``st:PATH_OR_NAME`` (any sentence-transformers model), ``openai:MODEL[@URL]``.
"""
from __future__ import annotations

from sirerag.embedding.base import Embedder
from sirerag.embedding.precision import PRECISIONS, resolve_precision
from sirerag.core.errors import check

SPEC_FORMS = "'minilm', 'minilm-onnx', 'st:PATH_OR_NAME', 'openai:MODEL' or 'openai:MODEL@URL'"
#: The backends that compute on torch, where ``embedder.precision`` applies.
TORCH_BACKENDS = ("minilm", "st")
#: The backends that have an int8 export (``embedder.precision = "int8"``).
INT8_BACKENDS = ("minilm",)


def parse_embedder_spec(spec: str, *, option: str = "embedder spec") -> tuple[str, str]:
    """``(backend, rest)`` of an embedder spec (``minilm``, ``st``, ``openai``), loading nothing; ``option``
    names the setting in errors.

    Raises:
        ConfigError: the spec has none of the forms :func:`load_embedder` takes, or an ``openai:`` spec names
            its server wrongly (:func:`~sirerag.llm.http.split_openai_spec`).
    """
    check(isinstance(spec, str) and bool(spec.strip()), option, spec, SPEC_FORMS)
    backend, sep, rest = spec.strip().partition(":")
    if spec.strip() in ("minilm", "minilm-onnx"):
        return spec.strip(), ""
    check(backend == "openai" or (backend == "st" and bool(sep) and bool(rest.strip())), option, spec,
          SPEC_FORMS)
    if backend == "openai":
        from sirerag.embedding.openai import DEFAULT_MODEL
        from sirerag.llm.http import split_openai_spec

        split_openai_spec(rest, default_model=DEFAULT_MODEL, option=option)
    return backend, rest.strip() if backend == "st" else rest


def check_precision(backend: str, precision: str, where: str = "precision") -> None:
    """Check an ``embedder.precision`` setting for ``backend`` (from :func:`parse_embedder_spec`).

    Raises:
        ConfigError: not one of :data:`~sirerag.embedding.precision.PRECISIONS`, ``bfloat16`` for a backend not on
            torch, or ``int8`` for a backend other than ``minilm``.
    """
    check(precision in PRECISIONS, where, precision, "one of " + ", ".join(repr(p) for p in PRECISIONS))
    allowed = [p for p in PRECISIONS if (p != "bfloat16" or backend in TORCH_BACKENDS)
               and (p != "int8" or backend in INT8_BACKENDS)]
    named = ", ".join(repr(p) for p in allowed[:-1]) + f" or {allowed[-1]!r}"
    check(precision in allowed, where, precision, f"{named} for the {backend} embedder (bfloat16 applies to "
                                                  "'minilm' and 'st:' models, int8 to 'minilm' only)")


def make_embedder(spec: str, *, batch_size: int = 64, show_progress: bool = False,
                  precision: str = "float32") -> Embedder:
    """The embedder ``spec`` names, uncached, in this process (what an engine's workers load).

    ``precision`` (``auto``, ``float32`` or ``bfloat16``, :mod:`~sirerag.embedding.precision`) applies to the
    torch backends (``minilm``, ``st:``); the others compute as their runtime or API does. ``int8`` (``minilm``
    only) is MiniLM's int8 ONNX export on ONNX Runtime (:func:`~sirerag.embedding.query_export.load_minilm_int8`).

    Raises:
        ConfigError: ``spec``, ``batch_size`` or ``precision`` is invalid (``bfloat16`` for a backend that is
            not torch's, ``int8`` for one other than ``minilm``), or an API key is missing.
        MissingExtraError: the backend's optional packages are not installed.
        SireragError: the MiniLM weights fail their sha256 check.
    """
    check(isinstance(batch_size, int) and batch_size > 0, "batch_size", batch_size, "a positive integer")
    backend, rest = parse_embedder_spec(spec)
    check_precision(backend, precision)
    if precision == "int8":
        from sirerag.embedding.query_export import load_minilm_int8

        return load_minilm_int8(batch_size=batch_size)
    if backend in TORCH_BACKENDS:
        precision = resolve_precision(precision)
    if backend == "minilm":
        from sirerag.embedding.sentence_transformers import load_minilm

        return load_minilm(batch_size=batch_size, show_progress=show_progress, precision=precision)
    if backend == "minilm-onnx":
        from sirerag.embedding.st_onnx import load_minilm_onnx

        return load_minilm_onnx("minilm-onnx", batch_size=batch_size, show_progress=show_progress)
    if backend == "st":
        from sirerag.embedding.sentence_transformers import load_sentence_transformer

        return load_sentence_transformer(rest, batch_size=batch_size, show_progress=show_progress,
                                         precision=precision)
    from sirerag.embedding.openai import DEFAULT_MODEL, OpenAIEmbedder
    from sirerag.llm.http import split_openai_spec

    model, url = split_openai_spec(rest, default_model=DEFAULT_MODEL)
    return OpenAIEmbedder(model, base_url=url, batch_size=batch_size, show_progress=show_progress)
