"""Export the shipped MiniLM to the ONNX query folder that :mod:`~sirerag.embedding.query_encoder` reads.

The transformer is exported with torch's TorchScript ONNX exporter (``dynamo=False``:
the dynamo exporter needs onnxscript; this one needs only the ``onnx`` package), next to
the tokenizer the model really uses (its fast tokenizer's ``tokenizer.json``) and the
model folder's sentence-transformers config files; the weights are kept beside the graph
(``model.onnx.data``), which ONNX Runtime maps instead of copying. Before the folder is put in place
(atomically, :func:`sirerag.core.io.atomic_dir`), the ONNX Runtime encoder over it is checked
against the torch model on a few texts of different lengths; an export that does not
match (cosine below :data:`MIN_COSINE`) is discarded and raises.

``embedder.precision = "int8"`` uses a second folder made from that export
(:func:`ensure_minilm_int8_export`): its weights quantised to int8 by ONNX Runtime's ``quantize_dynamic``
(per-channel signed int8 weights, activations quantised at run time), checked against the float32 export
(cosine at least :data:`INT8_MIN_COSINE`) and kept under ``$XDG_CACHE_HOME/sirerag/onnx-query-int8/<weights
sha256>``. Its spec ends in ``#int8``.
"""
from __future__ import annotations

import json
import logging
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from sirerag.embedding.query_encoder import (
    EXPORT_VERSION,
    INFO_FILE,
    MODEL_FILE,
    WEIGHTS_FILE,
    SPEC_SUFFIX,
    OnnxQueryEmbedder,
    export_info,
    query_model_dir,
    read_pipeline,
    runtime_available,
)
from sirerag.embedding.base import usable_cores
from sirerag.embedding.precision import INT8_SUFFIX
from sirerag.core.errors import SireragError, require
from sirerag.core.io import atomic_dir, user_cache_dir

logger = logging.getLogger(__name__)

#: the export is kept only when every probe text's vector has at least this cosine with torch's
MIN_COSINE = 0.9999
#: the int8 export is kept only when every probe text's vector has at least this cosine with the float32 export's
#: (measured: 0.987 at least on 1,000 passages, 0.963 on 8,309 entity names; docs/performance.md)
INT8_MIN_COSINE = 0.95
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBES = ("Where was Clara Peeters born?", "river", "  The Hudson's Bay Company was founded in 1670 and traded "
           "furs across a large part of North America for two centuries. " * 3)


def export_available() -> bool:
    """True when the export can run here: onnxruntime, tokenizers and onnx are installed."""
    import importlib.util

    return runtime_available() and importlib.util.find_spec("onnx") is not None


def ensure_minilm_query_export(*, force: bool = False) -> dict[str, Any]:
    """Export the shipped MiniLM to its ONNX query folder unless a valid export is already there
    (``force``: export again, replacing it).

    Returns:
        ``{"backend", "key", "exported", "seconds"}``: the folder key (leading sha256 digits of the
        weights), whether this call wrote the export, and the seconds it took.

    Raises:
        MissingExtraError: torch/sentence-transformers, onnx, onnxruntime or tokenizers is missing.
        SireragError: the weights fail their sha256 check, or the export does not match the torch model.
    """
    from sirerag.embedding.sentence_transformers import (
        MINILM_SHA256_PREFIX,
        MINILM_SPEC,
        load_minilm,
        minilm_dir,
        verify_sha256,
    )

    for module in ("onnx", "onnxruntime", "tokenizers"):
        require(module, "local", purpose="the ONNX export of MiniLM for fast dense searches")
    source = minilm_dir()
    digest = verify_sha256(source / "model.safetensors", MINILM_SHA256_PREFIX)
    folder = query_model_dir(digest)
    info = export_info(folder)
    current = info is not None and info.get("source_sha256") == digest and info.get("version") == EXPORT_VERSION
    if not force and current:  # an export of an older version is written again
        return {"backend": "onnxruntime", "key": folder.name, "exported": False, "seconds": 0.0}
    start = time.perf_counter()
    embedder = load_minilm(show_progress=False)
    export_query_model(embedder.model, source, folder, source_sha256=digest, spec=MINILM_SPEC)
    seconds = round(time.perf_counter() - start, 3)
    logger.info("exported MiniLM to ONNX for fast dense searches in %s (%.1f s, once per machine)", folder, seconds)
    return {"backend": "onnxruntime", "key": folder.name, "exported": True, "seconds": seconds}


def int8_model_dir(digest: str) -> Path:
    """Where the int8 export of the weights with sha256 ``digest`` is kept."""
    return user_cache_dir("onnx-query-int8", digest[:16])


def require_int8() -> None:
    """Raise MissingExtraError naming the extra when a package ``embedder.precision = "int8"`` needs is missing."""
    for module in ("onnx", "onnxruntime", "tokenizers"):
        require(module, "local", purpose="embedder.precision = 'int8' (MiniLM's int8 ONNX export)")


def ensure_minilm_int8_export(*, force: bool = False) -> dict[str, Any]:
    """Quantise the ONNX export of the shipped MiniLM to int8 weights unless a valid int8 export is already
    there (``force``: again); the float32 export is made first when missing (:func:`ensure_minilm_query_export`).

    Returns:
        ``{"backend", "key", "exported", "seconds"}`` as :func:`ensure_minilm_query_export`; ``backend`` is
        ``onnxruntime-int8`` and the folder is :func:`int8_model_dir` of the key.

    Raises:
        MissingExtraError: onnxruntime, onnx or tokenizers is missing (and torch, when the float32 export is).
        SireragError: the weights fail their sha256 check, or the int8 vectors stray from the float32 export's.
    """
    from sirerag.embedding.sentence_transformers import MINILM_SHA256_PREFIX, MINILM_SPEC, minilm_dir, verify_sha256

    require_int8()
    digest = verify_sha256(minilm_dir() / "model.safetensors", MINILM_SHA256_PREFIX)
    folder = int8_model_dir(digest)
    info = export_info(folder)
    if not force and info is not None and info.get("source_sha256") == digest and info.get("version") == EXPORT_VERSION:
        return {"backend": "onnxruntime-int8", "key": folder.name, "exported": False, "seconds": 0.0}
    start = time.perf_counter()
    source = query_model_dir(ensure_minilm_query_export()["key"])
    quantize_query_model(source, folder, source_sha256=digest, spec=MINILM_SPEC)
    seconds = round(time.perf_counter() - start, 3)
    logger.info("quantised MiniLM's ONNX export to int8 in %s (%.1f s, once per machine)", folder, seconds)
    return {"backend": "onnxruntime-int8", "key": folder.name, "exported": True, "seconds": seconds}


def quantize_query_model(source: str | Path, folder: str | Path, *, source_sha256: str, spec: str) -> Path:
    """Write into ``folder`` (atomically) the ONNX export folder ``source`` with its weights quantised to int8
    (``quantize_dynamic``, per-channel QInt8), once its vectors match ``source``'s to :data:`INT8_MIN_COSINE`.

    Raises:
        SireragError: the int8 vectors differ more than that from the float32 export's.
    """
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source, folder = Path(source), Path(folder)
    with atomic_dir(folder) as tmp:
        _copy_config(source, tmp)
        shutil.copyfile(source / "tokenizer.json", tmp / "tokenizer.json")
        quantize_dynamic(str(source / MODEL_FILE), str(tmp / MODEL_FILE), weight_type=QuantType.QInt8,
                         per_channel=True)
        reference = OnnxQueryEmbedder(source, spec + SPEC_SUFFIX).encode_queries(list(_PROBES))
        cosines = (OnnxQueryEmbedder(tmp, spec + INT8_SUFFIX).encode_queries(list(_PROBES)) * reference).sum(axis=1)
        if float(cosines.min()) < INT8_MIN_COSINE:
            raise SireragError(f"the int8 export of {spec} differs from its float32 export (cosine "
                               f"{float(cosines.min()):.4f} < {INT8_MIN_COSINE}); it was not kept")
        (tmp / INFO_FILE).write_text(json.dumps({"version": EXPORT_VERSION, "source_sha256": source_sha256,
                                                 "spec": spec, "quantization": "quantize_dynamic, per-channel QInt8",
                                                 "onnxruntime": onnxruntime.__version__}, indent=2) + "\n",
                                     encoding="utf-8")
    return folder


def load_minilm_int8(*, batch_size: int = 64, threads: int | None = None) -> OnnxQueryEmbedder:
    """MiniLM's int8 export on ONNX Runtime (made first when missing, :func:`ensure_minilm_int8_export`), with
    ``threads`` intra-op threads (default: one per core this process may use); spec ``...#int8``.

    Raises:
        the errors of :func:`ensure_minilm_int8_export`.
    """
    from sirerag.embedding.sentence_transformers import MINILM_SPEC

    key = ensure_minilm_int8_export()["key"]
    return OnnxQueryEmbedder(int8_model_dir(key), MINILM_SPEC + INT8_SUFFIX,
                             batch_size=batch_size, threads=threads or usable_cores(), precision="int8")


def export_query_model(model: Any, source: str | Path, folder: str | Path, *, source_sha256: str,  # Any: a
                       spec: str) -> Path:  # SentenceTransformer (an optional extra's class)
    """Export the loaded ``SentenceTransformer`` ``model`` (loaded from the folder ``source``)
    into ``folder``, replacing it atomically once the export matches the torch model.

    Raises:
        SireragError: ``source`` uses modules the ONNX encoder does not support, or the export's
            vectors differ from the torch model's.
    """
    import torch

    source, folder = Path(source), Path(folder)
    read_pipeline(source)  # refuse an unsupported folder before any work
    with atomic_dir(folder) as tmp:
        _copy_config(source, tmp)
        model.tokenizer.backend_tokenizer.save(str(tmp / "tokenizer.json"))
        transformer = _last_hidden_state(model[0].auto_model).eval()
        ids = torch.ones((2, 8), dtype=torch.long)
        axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings
            torch.onnx.export(transformer, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(tmp / MODEL_FILE),
                              dynamo=False, input_names=list(_INPUTS), output_names=["last_hidden_state"],
                              dynamic_axes=axes, opset_version=17)
        _weights_beside(tmp / MODEL_FILE)
        _check_parity(model, OnnxQueryEmbedder(tmp, spec + SPEC_SUFFIX))
        (tmp / INFO_FILE).write_text(json.dumps({"version": EXPORT_VERSION, "source_sha256": source_sha256,
                                                 "spec": spec, "torch": torch.__version__}, indent=2) + "\n",
                                     encoding="utf-8")
    return folder


def _weights_beside(model_file: Path) -> None:
    """Move the weights of ``model_file`` into :data:`WEIGHTS_FILE` beside it (ONNX external data, one file),
    which ONNX Runtime maps at session start instead of copying (MiniLM: about 0.04 s instead of 0.11 s)."""
    import onnx

    model = onnx.load(str(model_file))
    onnx.save_model(model, str(model_file), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=WEIGHTS_FILE, size_threshold=1024)


def _last_hidden_state(transformer: Any) -> Any:
    """A torch module around the transformer that returns only its token vectors."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    return LastHiddenState()


def _copy_config(source: Path, target: Path) -> None:
    """Copy the sentence-transformers config files of ``source`` (the ones the encoder reads)."""
    modules = json.loads((source / "modules.json").read_text(encoding="utf-8"))
    names = ["modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"]
    names += [str(Path(m["path"]) / "config.json") for m in modules if m.get("path")]
    for name in names:
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / name, target / name)


def _check_parity(model: Any, onnx: OnnxQueryEmbedder) -> None:
    reference = np.asarray(model.encode(list(_PROBES), convert_to_numpy=True, normalize_embeddings=True,
                                        show_progress_bar=False), dtype=np.float32)
    cosines = (onnx.encode_queries(list(_PROBES)) * reference).sum(axis=1)
    if float(cosines.min()) < MIN_COSINE:
        raise SireragError(f"the ONNX export of {onnx.spec} differs from the torch model (cosine "
                           f"{float(cosines.min()):.6f} < {MIN_COSINE}); it was not kept")
