"""The number format a local (torch) embedder computes in: ``float32`` or ``bfloat16``.

``bfloat16`` runs the model's matrix products under ``torch.autocast`` on the CPU; the weights stay
float32 and so do the returned vectors. On a CPU with bfloat16 instructions (x86 ``avx512_bf16`` or
``amx_bf16``) MiniLM encodes documents 1.6-1.8x faster, and its vectors keep a cosine of at least
0.9999 with float32's (docs/performance.md, "Embedding in bfloat16"). Without those instructions torch
emulates bfloat16, which is slower than float32, so ``auto`` (the default) chooses ``bfloat16`` only
where the CPU has them (asked of torch, whose cpuinfo library reads the CPU on Linux, macOS and Windows).

``int8`` (MiniLM only) is not a torch setting: MiniLM's ONNX export with its weights quantised to int8
runs on ONNX Runtime (:func:`~sirerag.embedding.query_export.load_minilm_int8`), for the build's texts and
a search's queries alike.

A bfloat16 embedder's spec ends in ``#bf16`` and an int8 one's in ``#int8``: the embedding cache keeps their
vectors apart from float32's, and the manifest records which one embedded the pool (a search of an int8 index
encodes its queries with the int8 model).
"""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any, Iterator

from sirerag.core.config.sections import EMBEDDER_PRECISIONS as PRECISIONS

logger = logging.getLogger(__name__)

#: Ends the spec of an embedder that computes in bfloat16.
BF16_SUFFIX = "#bf16"
#: Ends the spec of MiniLM's int8 export on ONNX Runtime.
INT8_SUFFIX = "#int8"
#: torch's CPU probes (``torch.cpu``, from the cpuinfo library it ships) of native bfloat16 matrix instructions.
BF16_PROBES = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")


def _torch_cpu() -> Any:
    import torch.cpu

    return torch.cpu


@functools.lru_cache(maxsize=1)
def native_bf16() -> bool:
    """Whether this CPU has bfloat16 matrix instructions (x86 ``avx512_bf16`` or AMX), as torch's CPU probes
    tell on every platform; False with a torch that has no such probe."""
    cpu = _torch_cpu()
    return any(bool(getattr(cpu, probe)()) for probe in BF16_PROBES if hasattr(cpu, probe))


def resolve_precision(setting: str) -> str:
    """``float32``, ``bfloat16`` or ``int8`` for the ``embedder.precision`` setting ``setting``."""
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
    return "bfloat16" if spec.endswith(BF16_SUFFIX) else "int8" if spec.endswith(INT8_SUFFIX) else "float32"


@contextlib.contextmanager
def computing_in(precision: str) -> Iterator[None]:
    """Run the block's torch CPU operations in ``precision`` (resolved): autocast for bfloat16."""
    if precision != "bfloat16":
        yield
        return
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16):
        yield
