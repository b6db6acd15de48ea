"""Setting up colbert-ai: checking it can run, finding checkpoints, compiling its extensions.

Nothing here imports colbert-ai itself (importing it changes the multiprocessing
start method); the work that needs it runs in :mod:`sirerag.retrievers._colbert_worker`.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from sirerag.core.errors import ConfigError, MissingExtraError, SireragError, check
from sirerag.retrievers._colbert_client import worker_env
from sirerag.retrievers._colbert_worker import EXTENSIONS

logger = logging.getLogger(__name__)


def require_colbert() -> str:
    """Check that colbert-ai can run here (without importing it); returns its version."""
    if importlib.util.find_spec("colbert") is None:
        raise MissingExtraError(
            "the optional dependency 'colbert-ai' is needed for the ColBERT retriever but is not installed; "
            "install it with: pip install 'sirerag[colbert]' (see docs/export.md for CPU notes)"
        )
    transformers = importlib.metadata.version("transformers")
    if int(transformers.split(".")[0]) >= 5:
        raise MissingExtraError(
            f"colbert-ai needs transformers<5 (its indexing crashes with 5.x), found transformers {transformers}; "
            "install a compatible one with: pip install 'sirerag[colbert]'"
        )
    return importlib.metadata.version("colbert-ai")


def resolve_checkpoint(checkpoint: str, *, download: bool = True) -> Path:
    """The local folder of a ColBERT checkpoint given as a path or a Hugging Face name.

    A name is looked up in the local Hugging Face cache first; it is downloaded only
    when missing, ``download`` is true and ``HF_HUB_OFFLINE`` is not set (searching
    never downloads).

    Raises:
        ConfigError: a local path without a model in it, or a name that cannot be found.
    """
    check(isinstance(checkpoint, str) and bool(checkpoint.strip()), "checkpoint", checkpoint,
          "a local checkpoint folder or a Hugging Face model name")
    path = Path(checkpoint).expanduser()
    if path.exists():
        check(path.is_dir() and (path / "config.json").is_file(), "checkpoint", checkpoint,
              "a folder with a Hugging Face model (config.json, weights, tokenizer; ColBERT's artifact.metadata)")
        return path.resolve()
    if checkpoint.startswith((".", "/", "~")) or checkpoint.count("/") > 1:
        raise ConfigError(f"checkpoint must be an existing folder or a Hugging Face name, got {checkpoint!r} "
                          "(no such folder)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(checkpoint, local_files_only=True))
    except Exception as cached_error:  # not in the cache: try the hub unless told to stay offline
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        reason = f"{type(cached_error).__name__}"
        if download and not offline:
            try:
                logger.info("downloading ColBERT checkpoint %s from the Hugging Face Hub", checkpoint)
                return Path(snapshot_download(checkpoint))
            except Exception as exc:
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    raise ConfigError(
        f"checkpoint {checkpoint!r} is not a local folder, not in the Hugging Face cache, and could not be "
        f"downloaded ({reason}). On a machine with network run once: "
        f"huggingface-cli download {checkpoint} --local-dir ./{checkpoint.split('/')[-1]} "
        f"and give that folder in place of the name (./{checkpoint.split('/')[-1]})"
    )


def checkpoint_key(checkpoint: str) -> str:
    """How a checkpoint is recorded in the manifest: a resolved path, or the name as given."""
    path = Path(checkpoint).expanduser()
    return str(path.resolve()) if path.exists() else checkpoint


def extensions_compiled() -> bool:
    """Whether the four extensions are in the cache the worker uses (torch still checks
    their sources when it loads them and rebuilds one that is out of date)."""
    root = Path(worker_env()["TORCH_EXTENSIONS_DIR"])
    return all((root / name / f"{name}.so").is_file() for name, _ in EXTENSIONS)


def compile_extensions(timeout: float = 1200.0, *, force: bool = False) -> None:
    """Compile colbert-ai's four CPU extensions ahead of time, in parallel.

    They are cached under ``TORCH_EXTENSIONS_DIR`` (default
    ``~/.cache/sirerag/torch_extensions``), so this is a one-off (a CI install step);
    it returns at once when they are there, unless ``force``.

    Raises:
        SireragError: a compile failed or took longer than ``timeout`` seconds.
    """
    require_colbert()
    if not force and extensions_compiled():
        return
    proc = subprocess.Popen([sys.executable, "-m", "sirerag.retrievers._colbert_worker", "--compile-extensions"],
                            env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)  # the compilers it started too
        proc.wait()
        raise SireragError(f"compiling colbert-ai's extensions took longer than {timeout:g} s") from exc
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-20:])
        raise SireragError(f"compiling colbert-ai's extensions failed (exit code {proc.returncode}):\n{tail}")
