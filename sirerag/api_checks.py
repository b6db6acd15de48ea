"""The arguments of :class:`sirerag.Index`'s methods, checked before any work (an index read, a model loaded,
a folder written): a wrong type is one :class:`TypeError`, a wrong value one
:class:`~sirerag.core.errors.InputError`, each naming the argument.

Documents given in Python are checked as the rows of a ``.jsonl`` corpus
(:func:`sirerag.corpus.load.load_documents`); queries are cleaned as corpus texts are (control characters and
lone surrogates removed: :func:`sirerag.corpus.load.strip_controls`), then checked by
:func:`sirerag.retrievers.base.check_query` against :class:`~sirerag.core.config.QueryConfig`.

The checks take ``Any``: each is given whatever the caller passed, and its job is to refuse what is wrong.
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from sirerag.core.config import BuildConfig, QueryConfig
from sirerag.core.config.sections import SECTIONS
from sirerag.core.errors import ConfigError, InputError, check
from sirerag.corpus.load import load_documents, strip_controls
from sirerag.core.types import Document
from sirerag.retrievers.base import check_query, type_name

logger = logging.getLogger(__name__)

#: what a corpus argument may be, for messages
CORPUS = "a path (a .jsonl/.json file or a folder) or a list of documents (dicts with a 'text' field)"
#: what a corpus argument may be, for the type checker (a document's fields are JSON values: Any)
CorpusArgument = Union[str, "os.PathLike[str]", Sequence[Union[Mapping[str, Any], Document]]]
#: what ``trees`` may be, for messages
TREES_HINT = "a list of tree names such as ['similarity', 'relatedness'] ([] for the leaves alone)"


def check_path(value: object, name: str) -> None:
    """Raise :class:`TypeError` unless ``value`` is a path (a ``str`` or an ``os.PathLike``)."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type_name(value)}")


def corpus_argument(corpus: Any, *,  # Any: what a user gave, checked here (a TypeError names it)
                    warn_passage_bytes: int = 1_000_000) -> str | Path | list[Document]:
    """``corpus`` as a path, or its documents checked and cleaned (a list of dicts or Documents).

    Raises:
        TypeError: not a path nor a list of dicts/Documents (a lone dict, a number, None, bytes...).
        InputError: a document is invalid (naming ``corpus[i]`` and the field), or there is none.
    """
    if isinstance(corpus, (str, os.PathLike)):
        return corpus if isinstance(corpus, (str, Path)) else Path(corpus)
    if isinstance(corpus, (dict, Document)):
        raise TypeError(f"corpus must be {CORPUS}, got one {type_name(corpus)}: put it in a list")
    if isinstance(corpus, (bytes, bytearray)) or not hasattr(corpus, "__iter__"):
        raise TypeError(f"corpus must be {CORPUS}, got {type_name(corpus)}")
    return load_documents(corpus, where="corpus", warn_passage_bytes=warn_passage_bytes)


def queries_argument(queries: Any, config: QueryConfig, *, batch: bool) -> list[str]:  # Any: checked here
    """The query (``batch=False``) or queries (a list, a tuple or another iterable of them), cleaned of
    control characters and checked (types, blank, ``config.max_chars``); raises as
    :func:`~sirerag.retrievers.base.check_query`."""
    if batch and not isinstance(queries, (str, bytes, bytearray, dict, list, tuple)) and hasattr(queries, "__iter__"):
        queries = list(queries)  # a generator of queries
    check_query(queries, batch=batch)  # the types, before anything is cleaned
    cleaned = [strip_controls(q) for q in (queries if batch else [queries])]
    removed = sum(n for _, n in cleaned)
    if removed:
        logger.warning("removed %d control character(s) from the %s", removed, "queries" if batch else "query")
    out = [text for text, _ in cleaned]
    check_query(out if batch else out[0], batch=batch, max_chars=config.validate().max_chars)
    return out


def retriever_argument(retriever: object) -> None:
    """Raise :class:`TypeError` unless ``retriever`` is None or a retriever name."""
    if retriever is not None and not isinstance(retriever, str):
        raise TypeError("retriever must be a retriever name such as 'dense', 'bm25', 'ppr' or 'dense+bm25' "
                        f"(or None for the index's default), got {type_name(retriever)}")


def ids_argument(ids: Any) -> list[str]:  # Any: what a user gave, checked here (a TypeError names it)
    """Document ids to remove: one id or a list of them, each a non-empty ``str``."""
    if isinstance(ids, str):
        ids = [ids]
    elif isinstance(ids, (bytes, bytearray, dict)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"ids must be a document id (str) or a list of them, got {type_name(ids)}")
    ids = list(ids)
    for i, doc_id in enumerate(ids):
        if not isinstance(doc_id, str):
            hint = f" (document ids are strings: {str(doc_id)!r})" if isinstance(doc_id, int) else ""
            raise TypeError(f"ids[{i}] must be a str{hint}, got {type_name(doc_id)}")
        if not doc_id.strip():
            raise InputError(f"ids[{i}] must be a document id, got {doc_id!r}")
    if not ids:
        raise InputError("ids is empty: give the id(s) of the document(s) to remove")
    return ids


def llm_argument(llm: object) -> None:
    """Raise unless ``llm`` is an LLM spec of a valid form or a loaded LLM (``.complete`` and ``.spec``)."""
    if isinstance(llm, str):
        from sirerag.llm.factory import parse_spec

        parse_spec(llm, option="llm")  # a malformed spec is a ConfigError naming the argument
    elif not (callable(getattr(llm, "complete", None)) and hasattr(llm, "spec")):
        raise TypeError("llm must be an LLM spec such as 'openai:MODEL@http://HOST:PORT/v1' or 'hf:smollm2', or a "
                        f"loaded LLM (sirerag.llm.factory.load_llm), got {type_name(llm)}")


#: ``Index.build`` keywords that take one value of a section (``llm="openai:m"`` is ``llm={"spec": ...}``)
SHORTHANDS: dict[str, tuple[str, str]] = {
    "embedder": ("embedder", "spec"), "llm": ("llm", "spec"), "chunking": ("chunking", "mode"),
    "graph": ("graph", "enabled"), "extractor": ("extraction", "extractor"), "engine": ("engine", "name"),
    "follow_outside_links": ("corpus", "follow_outside_links"),
}


def build_config(config: BuildConfig | None = None,
                 **settings: Any) -> BuildConfig:  # Any: a section as a mapping or its dataclass, checked
    """``config`` (default :class:`BuildConfig`) with ``settings`` applied, validated.

    ``settings``: ``trees`` (:data:`TREES_HINT`: a list or tuple of names), ``seed``, any config section as a
    mapping of its fields or as its dataclass (``tree={"levels": 2}``), and the shorthands of
    :data:`SHORTHANDS` (``llm="hf:smollm2"``, ``chunking="passage"``, ``graph=True``,
    ``follow_outside_links=True``...).

    Raises:
        ConfigError: an unknown setting, a value of the wrong type or out of range.
    """
    config = config if config is not None else BuildConfig()
    check(isinstance(config, BuildConfig), "config", config, "a sirerag.core.config.BuildConfig")
    overrides: dict[str, Any] = {}
    for name, value in settings.items():
        if name == "trees":
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"trees must be {TREES_HINT}, got {value!r}")
            value = tuple(value)
        if name in SHORTHANDS and not isinstance(value, Mapping) and not is_dataclass(value):
            section, field = SHORTHANDS[name]
            overrides.setdefault(section, {})[field] = value
        elif name in SECTIONS and is_dataclass(value):
            overrides.setdefault(name, {}).update({f.name: getattr(value, f.name) for f in fields(value)})
        elif name in SECTIONS and isinstance(value, Mapping):
            overrides.setdefault(name, {}).update(value)
        elif name in ("trees", "seed"):
            overrides[name] = value
        else:
            allowed = sorted({"trees", "seed", *SECTIONS, *SHORTHANDS})
            raise ConfigError(f"unknown build setting {name}={value!r}; allowed: {allowed}")
    return config.with_overrides(**overrides).validate()


def progress(show_progress: bool | None) -> bool:
    """``show_progress`` as given, or (None) whether stderr is a terminal, as tqdm decides."""
    if show_progress is not None:
        return bool(show_progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())
