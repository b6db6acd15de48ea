"""Lone surrogates: JSON escapes such as ``\\ud800`` that decode to no Unicode character, which no UTF-8
encoder takes. Readers remove them wherever text enters, with a count in the log."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def strip_surrogates(value: Any) -> tuple[Any, int]:  # Any: a parsed JSON value, given back cleaned
    """``value`` (a string, or lists and objects of them) without lone surrogates (``"\\ud800"`` in
    JSON: not Unicode text, and no UTF-8 encoder takes it); returns it and how many were removed."""
    if isinstance(value, str):
        return _SURROGATE.subn("", value)
    if isinstance(value, list):
        pairs = [strip_surrogates(v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            (key, k), (item, n) = strip_surrogates(key), strip_surrogates(item)
            out[key] = item
            total += k + n
        return out, total
    return value, 0


def report_surrogates(path: Path, removed: int, lines: list[int]) -> None:
    if removed:
        logger.warning("%s: removed %d lone surrogate(s) (escapes such as \\ud800 that are not Unicode text) "
                       "from %d line(s), e.g. line %d", path, removed, len(lines), lines[0])


def has_surrogate_escape(raw: bytes) -> bool:
    """Whether raw JSON holds an escape of a surrogate (``\\ud800``-``\\udfff``): only then is a scrub needed."""
    return re.search(rb"\\u[dD][89a-fA-F]", raw) is not None
