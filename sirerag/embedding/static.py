"""A static embedder distilled from the shipped MiniLM with model2vec (extra ``static``).

``model2vec.distill`` runs the MiniLM transformer once over every token of its vocabulary and keeps one
vector per token (PCA-rotated, all 384 dimensions kept, SIF-weighted); a text's vector is then the mean of
its tokens' vectors: no transformer at encoding time, so short texts embed some hundred times faster than
on torch or ONNX Runtime. The distillation reads the local weights (sha256-checked) and downloads nothing;
it takes about a minute of CPU and is done once per machine, into
``$XDG_CACHE_HOME/sirerag/static/<weights sha256>`` (replaced atomically), like the ONNX query model
(:mod:`~sirerag.embedding.query_export`). The embedder's spec ends in :data:`STATIC_SUFFIX`, so its vectors
never mix with MiniLM's in a cache or an index.

The graph's entity names use it with ``graph.name_vectors = "static"``
(:class:`~sirerag.core.config.GraphConfig`); a search then embeds the query's unmatched entities with it too.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sirerag.core.errors import SireragError, require
from sirerag.core.io import atomic_dir, user_cache_dir
from sirerag.embedding.base import l2_normalize

logger = logging.getLogger(__name__)

#: ends the spec of the static embedder distilled from a model
STATIC_SUFFIX = "#m2v"
#: version of the distilled folder's layout; a folder of another version is distilled again
STATIC_VERSION = 1
INFO_FILE = "sirerag-static.json"
PURPOSE = "the static embedder distilled from MiniLM (graph.name_vectors = 'static')"


def static_model_dir(digest: str) -> Path:
    """Where the static model distilled from the weights with sha256 ``digest`` is kept."""
    return user_cache_dir("static", digest[:16])


class StaticEmbedder:
    """A model2vec static model: a text's vector is the mean of its tokens' vectors, L2-normalised.

    Args:
        folder: a folder ``model2vec``'s ``StaticModel.save_pretrained`` wrote.
        spec: the name reported in messages, cache keys and the graph's record.
        batch_size: texts per encoding call.
    """

    def __init__(self, folder: str | Path, spec: str, *, batch_size: int = 1024) -> None:
        require("model2vec", "static", purpose=PURPOSE)
        from model2vec import StaticModel

        self.folder = Path(folder)
        if not self.folder.is_dir():  # model2vec would take a missing folder for a hub name
            raise SireragError(f"{self.folder}: no static model there")
        try:
            self.model = StaticModel.from_pretrained(str(self.folder))
        except (OSError, ValueError, KeyError) as exc:
            raise SireragError(f"{self.folder}: cannot load the static model: {exc}") from exc
        self._spec, self.batch_size = spec, batch_size

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = self.model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=False,
                                 use_multiprocessing=False)
        return l2_normalize(np.asarray(rows, dtype=np.float32))

    def __repr__(self) -> str:
        return f"StaticEmbedder(spec={self._spec!r}, dim={self.dim}, folder={str(self.folder)!r})"


def distill_static(model: Any, folder: str | Path, *, source: str,  # Any: a SentenceTransformer (an extra's)
                   source_sha256: str) -> Path:
    """Distil the loaded ``SentenceTransformer`` ``model`` into a static model in ``folder`` (replaced
    atomically); ``source`` and ``source_sha256`` name its weights in the folder's record.

    Raises:
        MissingExtraError: model2vec is not installed.
    """
    require("model2vec.distill", "static", purpose=PURPOSE)
    from model2vec.distill import distill_from_model

    folder = Path(folder)
    transformer = model[0].auto_model
    static = distill_from_model(transformer, model.tokenizer, pca_dims="auto", device="cpu",
                                quantize_to="float32")
    with atomic_dir(folder) as tmp:
        static.save_pretrained(str(tmp))
        (tmp / INFO_FILE).write_text(json.dumps({"version": STATIC_VERSION, "source": source,
                                                 "source_sha256": source_sha256}, indent=2) + "\n",
                                     encoding="utf-8")
    return folder


def static_info(folder: str | Path) -> dict[str, Any] | None:
    """The record of a distilled folder of this version, else None."""
    try:
        info = json.loads((Path(folder) / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and info.get("version") == STATIC_VERSION else None


def load_minilm_static(*, batch_size: int = 1024) -> StaticEmbedder:
    """The static embedder distilled from the shipped MiniLM, distilling it first if this machine has
    none (once; about a minute of CPU).

    Raises:
        MissingExtraError: model2vec, or sentence-transformers and the MiniLM weights, are not installed.
        SireragError: the weights fail their sha256 check, or the distilled folder is unusable.
    """
    from sirerag.embedding.sentence_transformers import (
        MINILM_SHA256_PREFIX,
        MINILM_SPEC,
        load_minilm,
        minilm_dir,
        verify_sha256,
    )

    require("model2vec", "static", purpose=PURPOSE)
    source = minilm_dir()
    digest = verify_sha256(source / "model.safetensors", MINILM_SHA256_PREFIX)
    folder = static_model_dir(digest)
    info = static_info(folder)
    if info is None or info.get("source_sha256") != digest:
        start = time.perf_counter()
        distill_static(load_minilm(show_progress=False).model, folder, source=MINILM_SPEC, source_sha256=digest)
        logger.info("distilled a static embedder from MiniLM into %s (%.1f s, once per machine)", folder,
                    time.perf_counter() - start)
    return StaticEmbedder(folder, MINILM_SPEC + STATIC_SUFFIX, batch_size=batch_size)


def load_static_for(spec: str, *, batch_size: int = 1024) -> StaticEmbedder:
    """The static embedder recorded as ``spec`` (what a graph built with static names records).

    Raises:
        ConfigError: ``spec`` names no static embedder this version makes.
        the errors of :func:`load_minilm_static`.
    """
    from sirerag.core.errors import check
    from sirerag.embedding.sentence_transformers import MINILM_SPEC

    check(spec == MINILM_SPEC + STATIC_SUFFIX, "static embedder spec", spec, repr(MINILM_SPEC + STATIC_SUFFIX))
    return load_minilm_static(batch_size=batch_size)
