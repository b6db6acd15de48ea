"""Exact type checks of configuration dataclasses, driven by their annotations.

One checker for every section: a ``bool`` field takes only ``true``/``false``, an
``int`` field only an integer (not a bool), a ``float`` field a finite number (not a
string, not a bool), a ``str`` field a string, ``X | None`` either, ``tuple[T, ...]``
a tuple of ``T``. Range checks stay with each section; they run after this, so they
can compare numbers without guarding against strings.
"""
from __future__ import annotations

import math
import types
import typing
from dataclasses import fields, is_dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sirerag.core.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: seeds reach numpy's RandomState, which takes 0 <= seed < 2**32
SEED_LIMIT = 2**32


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_types(obj: DataclassInstance, where: str = "") -> None:
    """Raise :class:`ConfigError` unless every field of the dataclass ``obj`` holds exactly
    its annotated type.

    Args:
        obj: a dataclass instance (a config section).
        where: prefix of the field name in the message, e.g. ``"clustering"`` gives
            ``"clustering.threshold must be a number, got '0.1'"`` (a prefix ending in ``_`` is joined as it is:
            ``"bridge_"`` gives ``bridge_hops``).
    """
    cls: type = type(obj)
    hints = _hints(cls)
    prefix = f"{where}." if where and not where.endswith((" ", ".", "_")) else where
    for f in fields(obj):
        value = getattr(obj, f.name)
        hint = hints[f.name]
        if not _matches(value, hint):
            raise ConfigError(f"{prefix}{f.name} must be {describe(hint)}, got {value!r}")


def _matches(value: Any, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return type(value) is bool
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        if isinstance(value, float):
            return math.isfinite(value)
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return len(args) == len(value) and all(_matches(v, a) for v, a in zip(value, args))
    if isinstance(hint, type) and (hint is str or is_dataclass(hint)):
        return isinstance(value, hint)
    raise TypeError(f"check_types: unsupported annotation {hint!r}")


def describe(hint: object) -> str:
    """What a value of type ``hint`` looks like, for messages (``"a number"``, ``"true or false"``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return "omitted"
    if origin in (typing.Union, types.UnionType):
        named = [describe(a) for a in args if a is not type(None)]
        return " or ".join(named) + (" (or omitted)" if type(None) in args else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        inner = args[0] if args else Any
        return f"a list of {_plural(inner)}"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    return f"a {getattr(hint, '__name__', hint)}"


def _plural(hint: Any) -> str:
    return {bool: "booleans", int: "integers", float: "numbers", str: "strings"}.get(hint, describe(hint))
