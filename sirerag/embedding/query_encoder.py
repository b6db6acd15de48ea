"""A light query encoder: a sentence-transformers model folder exported to ONNX, run on
ONNX Runtime and ``tokenizers`` (extra ``local``), without torch or transformers.

A dense search of a ``minilm`` index needs only query vectors, and importing torch,
transformers and sentence-transformers costs several seconds per process. So the
build (which has torch loaded anyway) exports the shipped MiniLM once per machine to
``$XDG_CACHE_HOME/sirerag/onnx-query/<weights sha256>`` (:mod:`~sirerag.embedding.query_export`),
and a search uses that folder when it is there. The encoder follows the folder's own
sentence-transformers configuration -- ``modules.json`` (a Transformer, a Pooling and an
optional Normalize module, in that order), ``1_Pooling/config.json`` (mean or CLS
pooling), ``sentence_bert_config.json`` (``max_seq_length``, ``do_lower_case``) -- and
refuses a folder it cannot follow. It reports its own spec (``...#ort``), so a cache
keyed by spec never mixes its vectors with the torch model's.
"""
from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sirerag.embedding.base import l2_normalize
from sirerag.core.errors import SireragError
from sirerag.core.io import user_cache_dir

logger = logging.getLogger(__name__)

MODEL_FILE = "model.onnx"
#: the weights of an export of version 2, beside ``model.onnx`` (ONNX external data): ONNX Runtime maps them
#: instead of copying them out of the protobuf, so a session starts in about a third of the time
WEIGHTS_FILE = "model.onnx.data"
INFO_FILE = "sirerag-export.json"
#: version of the export folder layout written now; a build exports again over an older one
EXPORT_VERSION = 2
#: versions a search still reads (1: the weights inside ``model.onnx``)
READABLE_VERSIONS = (1, 2)
#: spec suffix of the ONNX Runtime encoder (cache keys and messages tell it from the torch model)
SPEC_SUFFIX = "#ort"
FAST_PATH_HINT = ("run 'sirerag cache query-model' (or any 'sirerag build' with the minilm embedder) once to "
                  "export MiniLM to ONNX, so that dense searches start without torch")
_TRANSFORMER, _POOLING, _NORMALIZE = (f"sentence_transformers.models.{n}" for n in ("Transformer", "Pooling",
                                                                                     "Normalize"))
_POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}


def query_model_dir(digest: str) -> Path:
    """Where the ONNX query export of the weights with sha256 ``digest`` is kept."""
    return user_cache_dir("onnx-query", digest[:16])


def runtime_available() -> bool:
    """True when onnxruntime and tokenizers can be imported (checked without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "tokenizers"))


@dataclass(frozen=True)
class Pipeline:
    """What a sentence-transformers folder does after the transformer, read from its config files."""

    max_seq_length: int
    lowercase: bool
    pooling: str  # "mean" or "cls"
    normalize: bool
    dim: int


def read_pipeline(folder: str | Path) -> Pipeline:
    """The pooling, normalisation and tokenisation settings of the model folder ``folder``.

    Raises:
        SireragError: a file is missing or unreadable, or the folder uses modules or a
            pooling mode this encoder does not support.
    """
    folder = Path(folder)
    modules = _read_json(folder / "modules.json")
    types = [m.get("type") for m in modules] if isinstance(modules, list) else None
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        raise SireragError(f"{folder / 'modules.json'}: modules {types} are not supported by the ONNX query "
                           f"encoder (it runs Transformer, Pooling and an optional Normalize)")
    pooling_file = folder / str(modules[1].get("path", "")) / "config.json"
    config = _read_json(pooling_file)
    modes = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v is True)
    if len(modes) != 1 or modes[0] not in _POOLING_MODES:
        raise SireragError(f"{pooling_file}: pooling {modes} is not supported by the ONNX query encoder "
                           f"(one of {sorted(_POOLING_MODES)})")
    if config.get("include_prompt", True) is not True:
        raise SireragError(f"{pooling_file}: include_prompt=false is not supported by the ONNX query encoder")
    settings = _read_json(folder / "sentence_bert_config.json")
    length, lower, dim = settings.get("max_seq_length"), settings.get("do_lower_case", False), \
        config.get("word_embedding_dimension")
    if not (isinstance(length, int) and length > 0 and isinstance(lower, bool) and isinstance(dim, int)):
        raise SireragError(f"{folder}: need an integer max_seq_length and a boolean do_lower_case in "
                           f"sentence_bert_config.json and word_embedding_dimension in {pooling_file.name}")
    return Pipeline(max_seq_length=length, lowercase=lower, pooling=_POOLING_MODES[modes[0]],
                    normalize=len(types) == 3, dim=dim)


def pool_tokens(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Sentence vectors from token vectors ``(batch, seq, dim)`` and the attention mask ``(batch, seq)``:
    the mean over the unmasked tokens (as sentence-transformers' Pooling) or the first token."""
    if mode == "cls":
        return hidden[:, 0].astype(np.float32)
    weights = mask.astype(np.float32)[:, :, None]
    return (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


class OnnxQueryEmbedder:
    """A sentence-transformers folder with an ONNX transformer, encoded on ONNX Runtime.

    Queries and documents are encoded the same way (the folder has no prompts). Rows are
    L2-normalised whatever the folder says, as every :class:`~sirerag.embedding.Embedder`'s are.

    Args:
        folder: the export folder (``model.onnx``, ``tokenizer.json`` and the
            sentence-transformers config files).
        spec: the name reported in messages and cache keys.
        batch_size: texts per ONNX Runtime call (texts are sorted by length first).
        threads: ONNX Runtime intra-op threads (a search encodes few texts: one is fastest).
        precision: what the folder's weights are (``float32``, or ``int8`` for a quantised export); an engine's
            workers load the same embedder with it (:class:`~sirerag.embedding.cache.EmbedWorker`).
    """

    def __init__(self, folder: str | Path, spec: str, *, batch_size: int = 64, threads: int = 1,
                 precision: str = "float32") -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.folder = Path(folder)
        self.pipeline = read_pipeline(self.folder)
        self._spec, self.batch_size, self.precision = spec, batch_size, precision
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
            self.session = onnxruntime.InferenceSession(str(self.folder / MODEL_FILE), options,
                                                        providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime's and tokenizers' errors derive from Exception only
            raise SireragError(f"{self.folder}: cannot load the ONNX model or its tokenizer: {exc}") from exc
        pad = self.tokenizer.padding or {}
        pad_id, pad_token = pad.get("pad_id", 0), pad.get("pad_token", "[PAD]")
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)  # to the longest text of a call
        self.tokenizer.enable_truncation(max_length=self.pipeline.max_seq_length)
        self._inputs = [i.name for i in self.session.get_inputs()]

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def dim(self) -> int:
        return self.pipeline.dim

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        prepared = [t.strip().lower() if self.pipeline.lowercase else t.strip() for t in texts]
        order = sorted(range(len(prepared)), key=lambda i: len(prepared[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            out[rows] = self._encode_batch([prepared[i] for i in rows])
        return l2_normalize(out)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        arrays = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings],
                  "token_type_ids": [e.type_ids for e in encodings]}
        feed = {name: np.asarray(arrays[name], dtype=np.int64) for name in self._inputs}
        hidden = self.session.run(None, feed)[0]
        vectors = pool_tokens(hidden, feed.get("attention_mask", np.asarray(arrays["attention_mask"])),
                              self.pipeline.pooling)
        return l2_normalize(vectors) if self.pipeline.normalize else vectors

    def __repr__(self) -> str:
        return f"OnnxQueryEmbedder(spec={self._spec!r}, dim={self.dim}, folder={str(self.folder)!r})"


def export_info(folder: str | Path) -> dict[str, Any] | None:
    """The export record of ``folder`` when it holds a usable export of this version, else None."""
    folder = Path(folder)
    try:
        info = json.loads((folder / INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("version") not in READABLE_VERSIONS or \
            not (folder / MODEL_FILE).is_file():
        return None
    return info


def load_minilm_query_embedder(*, batch_size: int = 64, threads: int = 1) -> OnnxQueryEmbedder | None:
    """MiniLM on ONNX Runtime when its export for the installed weights exists and onnxruntime
    and tokenizers are installed; else None, after one info log line saying how to get it.
    ``threads``: intra-op threads (one for queries; a build's many short texts use every core).

    Raises:
        MissingExtraError: the MiniLM weights package is not installed.
        SireragError: the weights fail their sha256 check, or the export folder is unusable.
    """
    from sirerag.embedding.sentence_transformers import MINILM_SHA256_PREFIX, MINILM_SPEC, minilm_dir, verify_sha256

    if not runtime_available():
        logger.info("dense search loads torch for the query encoder: onnxruntime or tokenizers is not "
                    "installed; install 'sirerag[local]' and %s", FAST_PATH_HINT)
        return None
    digest = verify_sha256(minilm_dir() / "model.safetensors", MINILM_SHA256_PREFIX)
    folder = query_model_dir(digest)
    info = export_info(folder)
    if info is None or info.get("source_sha256") != digest:
        logger.info("dense search loads torch for the query encoder: no ONNX export of MiniLM in %s; %s",
                    folder, FAST_PATH_HINT)
        return None
    try:
        embedder = OnnxQueryEmbedder(folder, MINILM_SPEC + SPEC_SUFFIX, batch_size=batch_size, threads=threads)
    except SireragError as exc:
        logger.warning("dense search loads torch for the query encoder: the ONNX export is unusable (%s); "
                       "rewrite it with 'sirerag cache query-model --force'", exc)
        return None
    logger.debug("encoding queries with %s on ONNX Runtime", folder)
    return embedder


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SireragError(f"{path}: cannot read the model configuration: {exc}") from exc
