"""Every code name a reference page (``docs/*.md``) cites exists, so the pages stay true when code is renamed or
moved. The dated studies of ``docs/experiments/`` are left out: they cite the code of their day.

Three forms are checked, each in backticks: ``sirerag.pkg.module:Name.attr`` (the module imported, the names
looked up on it), ``sirerag.pkg.module.name`` (the longest importable prefix imported, the rest looked up) and
``dir/module.py:Name`` or ``sirerag/dir/module.py`` (the file exists in the package or the repository; the
name is looked up on its module). A name followed by "logger" is a logger's, not code's. A property ends the
look-up (what follows is an instance's attribute). docs/architecture.md's "How a query becomes a ranking" must
have its ten numbered steps, each citing a name."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
CODE = re.compile(r"`([^`\s]+)`")
LOGGER = re.compile(r"`([^`\s]+)`\s+logger")
COLON = re.compile(r"^(sirerag(?:\.\w+)*):(\w+(?:\.\w+)*)$")
DOTTED = re.compile(r"^sirerag(?:\.\w+)+$")
FILE = re.compile(r"^(?:sirerag/)?((?:\w+/)*\w+\.py)(?::(\w+(?:\.\w+)*))?$")
SECTION = "## How a query becomes a ranking"
#: dotted names the page cites that are not Python names: entry-point groups (checked in pyproject.toml)
ENTRY_POINT_GROUPS = {"sirerag.commands"}


def lookup(module: str, names: str) -> object:
    """``module``'s attribute path ``names`` (AttributeError naming the part that is missing)."""
    value: object = importlib.import_module(module)
    for part in names.split("."):
        value = getattr(value, part)
        if isinstance(value, property):
            break
    return value


def resolve(cited: str) -> None:
    """Import and look up one cited name; an error when it does not exist."""
    if m := COLON.match(cited):
        lookup(m.group(1), m.group(2))
        return
    if cited in ENTRY_POINT_GROUPS:
        assert f'[project.entry-points."{cited}"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8"), cited
        return
    if DOTTED.match(cited):
        parts = cited.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name is not None and not module.startswith(exc.name) and exc.name != module:
                    raise  # the module exists but imports something missing
                continue
            if cut < len(parts):
                lookup(module, ".".join(parts[cut:]))
            return
        raise ModuleNotFoundError(cited)
    if m := FILE.match(cited):
        found = [p for p in (ROOT / "sirerag" / m.group(1), ROOT / m.group(1)) if p.exists()]
        if not found:
            raise FileNotFoundError(f"neither sirerag/{m.group(1)} nor {m.group(1)}")
        if m.group(2):
            module = ".".join(found[0].relative_to(ROOT).with_suffix("").parts)
            lookup(module.removesuffix(".__init__"), m.group(2))


def cited_names(text: str) -> list[str]:
    loggers = set(LOGGER.findall(text))
    return sorted({c for c in CODE.findall(text) if c not in loggers and (COLON.match(c) or DOTTED.match(c) or
                                                                         (FILE.match(c) and "/" in c))})


def test_the_page_cites_names_in_every_form():
    names = cited_names(PAGE.read_text(encoding="utf-8"))
    assert any(COLON.match(n) for n in names) and any(DOTTED.match(n) for n in names)
    assert any(FILE.match(n) for n in names)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_name_exists(page):
    missing = []
    for cited in cited_names(page.read_text(encoding="utf-8")):
        try:
            resolve(cited)
        except (ImportError, AttributeError, FileNotFoundError, AssertionError) as exc:
            missing.append(f"{cited}: {type(exc).__name__}: {exc}")
    assert missing == [], f"docs/{page.name} cites names that do not exist"


def test_loggers_and_properties_are_not_checked_as_code():
    assert cited_names("its log lines go to the `sirerag.no.such` logger; see `sirerag.api:Index`") == [
        "sirerag.api:Index"]
    resolve("sirerag.Index.loaded.commit")  # a property: the rest is an instance attribute


def test_a_missing_name_fails():
    with pytest.raises(AttributeError, match="no_such_function"):
        resolve("sirerag.retrievers.ppr:no_such_function")
    with pytest.raises(AttributeError, match="NoSuchClass"):
        resolve("sirerag.pool.store.NoSuchClass")
    with pytest.raises(FileNotFoundError, match="no_such/module.py"):
        resolve("no_such/module.py:load")


def test_the_query_path_has_ten_steps_each_naming_code():
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps = re.split(r"^\d+\. ", section, flags=re.M)[1:]
    assert len(steps) == 10
    for n, step in enumerate(steps, start=1):
        assert any(COLON.match(c) for c in CODE.findall(step)), f"step {n} names no module:function"
