"""Exception types shared by every layer, and the optional-dependency guard."""
from __future__ import annotations

import importlib
from types import ModuleType


class SireragError(Exception):
    """Base class for errors raised by sirerag."""


class ConfigError(SireragError, ValueError):
    """A configuration value is invalid: the message names parameter, value and what is allowed."""


class InputError(SireragError, ValueError):
    """User input (corpus, questions, index directory) is invalid: the message names file and line."""


class IndexFormatError(SireragError):
    """An index directory is missing files or was written by an incompatible format version."""


class IndexChangedError(IndexFormatError):
    """The index was replaced (a build, add or remove committed) while a loaded copy was being read:
    what is read next would mix two indexes. Load it again."""


class MissingExtraError(SireragError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def require(module: str, extra: str, *, purpose: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install 'sirerag[extra]'``.

    Args:
        module: dotted module name to import.
        extra: the sirerag extra that installs it.
        purpose: what the module is needed for, used in the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = f" for {purpose}" if purpose else ""
        raise MissingExtraError(
            f"the optional dependency '{module}' is needed{what} but is not installed; "
            f"install it with: pip install 'sirerag[{extra}]'"
        ) from exc


def check(condition: bool, parameter: str, value: object, allowed: str) -> None:
    """Raise :class:`ConfigError` ``"<parameter> must be <allowed>, got <value>"`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"{parameter} must be {allowed}, got {value!r}")


class IndexLockedError(SireragError):
    """Another process is writing the index (or export) folder; the message names its pid."""


class DiskFullError(SireragError, OSError):
    """The file system ran out of space while a file was written; the message names the file."""


class CacheError(SireragError):
    """An on-disk cache (SQLite) is damaged: the message names the file and how to recover."""
