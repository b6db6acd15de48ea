"""MiniLM on ONNX Runtime (extra ``onnx``), through sentence-transformers' own ``backend="onnx"``.

``minilm-onnx`` exports the shipped all-MiniLM-L6-v2 weights (sha256-checked) to
ONNX with Optimum, offline. (Its dynamically quantised int8 export is not offered here: its vectors fall
below cosine 0.99 with the torch model; ``embedder.precision = "int8"`` quantises the query export instead,
:func:`~sirerag.embedding.query_export.ensure_minilm_int8_export`.) The export is done once and kept in a model folder
(default ``$XDG_CACHE_HOME/sirerag/onnx/<weights sha256>``, replaced atomically),
so later loads only read it. Each spec has its own name in manifests and cache
keys, so vectors of different backends never mix.
"""
from __future__ import annotations

import logging
from pathlib import Path

from sirerag.embedding.sentence_transformers import (
    MINILM_SHA256_PREFIX,
    MINILM_SPEC,
    SentenceTransformerEmbedder,
    minilm_dir,
    verify_sha256,
)
from sirerag.core.errors import require
from sirerag.core.io import atomic_dir, user_cache_dir

logger = logging.getLogger(__name__)

#: embedder spec -> (ONNX file inside the model folder, name recorded in manifests and cache keys)
ONNX_SPECS = {
    "minilm-onnx": ("onnx/model.onnx", f"{MINILM_SPEC}#onnx"),
}


def onnx_model_dir(digest: str) -> Path:
    """Where the ONNX export of the weights with sha256 ``digest`` is kept."""
    return user_cache_dir("onnx", digest[:16])


def load_minilm_onnx(spec: str, *, model_dir: str | Path | None = None, batch_size: int = 64,
                     show_progress: bool = True) -> SentenceTransformerEmbedder:
    """Load (exporting on first use) MiniLM for ONNX Runtime; ``spec`` is a key of :data:`ONNX_SPECS`.

    Raises:
        MissingExtraError: optimum/onnxruntime or the MiniLM weights are not installed.
        SireragError: the shipped weights fail their sha256 check.
    """
    require("sentence_transformers", "local", purpose="local embedding models")
    require("optimum.onnxruntime", "onnx", purpose=f"the '{spec}' embedder")
    file_name, name = ONNX_SPECS[spec]
    source = minilm_dir()
    digest = verify_sha256(source / "model.safetensors", MINILM_SHA256_PREFIX)
    folder = Path(model_dir) if model_dir is not None else onnx_model_dir(digest)
    if not (folder / file_name).is_file():
        _export(source, folder)
    from sentence_transformers import SentenceTransformer

    logger.info("loading %s from %s", file_name, folder)
    model = SentenceTransformer(str(folder), backend="onnx", local_files_only=True,
                                model_kwargs={"file_name": file_name})
    return SentenceTransformerEmbedder(model, name, batch_size=batch_size, show_progress=show_progress)


def _export(source: Path, folder: Path) -> None:
    """Export the model in ``source`` to ONNX into ``folder``, atomically."""
    from sentence_transformers import SentenceTransformer

    logger.info("exporting %s to ONNX in %s (once)", source, folder)
    with atomic_dir(folder) as tmp:
        model = SentenceTransformer(str(source), backend="onnx", local_files_only=True)
        model.save_pretrained(str(tmp))
