"""The number format a local (torch) embedder computes in: ``float32`` or ``bfloat16``.

``bfloat16`` runs the model's matrix products under ``torch.autocast`` on the CPU; the weights stay
float32 and so do the returned vectors. On a CPU with bfloat16 instructions (x86 ``avx512_bf16`` or
``amx_bf16``) MiniLM encodes documents 1.6-1.8x faster, and its vectors keep a cosine of at least
0.9999 with float32's (docs/performance.md, "Embedding in bfloat16"). Without those instructions torch
emulates bfloat16, which is slower than float32, so ``auto`` (the default) chooses ``bfloat16`` only
where the CPU has them.

A bfloat16 embedder's spec ends in ``#bf16``: the embedding cache keeps its vectors apart from
float32's, and the manifest records which one embedded the pool.
"""
from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path
from typing import Iterator

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "float32", "bfloat16")
#: Ends the spec of an embedder that computes in bfloat16.
BF16_SUFFIX = "#bf16"
#: CPU flags (Linux ``/proc/cpuinfo``) of native bfloat16 matrix instructions.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of the first ``flags`` line of a ``/proc/cpuinfo`` text (empty when it has none)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


@functools.lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether this CPU has bfloat16 matrix instructions (read from ``/proc/cpuinfo``; False where
    there is none, as on macOS and Windows)."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(cpu_flags(text) & BF16_FLAGS)


def resolve_precision(setting: str) -> str:
    """``float32`` or ``bfloat16`` for the ``embedder.precision`` setting ``setting``."""
    if setting == "auto":
        return "bfloat16" if native_bf16() else "float32"
    if setting == "bfloat16" and not native_bf16():
        logger.warning("embedder.precision = 'bfloat16' on a CPU without bfloat16 instructions: torch emulates "
                       "them, which is slower than float32")
    return setting


def spec_with_precision(spec: str, precision: str) -> str:
    """``spec`` as an embedder computing in ``precision`` (resolved) records it."""
    return spec + BF16_SUFFIX if precision == "bfloat16" else spec


def precision_of(spec: str) -> str:
    """The precision an embedder with the recorded ``spec`` computed in (:func:`spec_with_precision` read back)."""
    return "bfloat16" if spec.endswith(BF16_SUFFIX) else "float32"


@contextlib.contextmanager
def computing_in(precision: str) -> Iterator[None]:
    """Run the block's torch CPU operations in ``precision`` (resolved): autocast for bfloat16."""
    if precision != "bfloat16":
        yield
        return
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16):
        yield
