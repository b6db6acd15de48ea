"""No import circle among sirerag's modules (issue 27), counting the imports inside functions.

Every module under ``sirerag/`` is parsed (nothing is imported); each ``import`` and ``from ... import``
anywhere in it, in a function too, is an edge to the sirerag module it names: ``from sirerag.a import b``
points to ``sirerag.a.b`` when that is a module, else to ``sirerag.a`` (its ``__init__``). A package is
not an edge of its submodules' imports, as Python runs it first anyway.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sirerag"


def modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The sirerag modules ``name`` imports, wherever in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            named += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1 packages
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            named += [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = set()
    for target in named:
        while target not in known and "." in target:  # an attribute of a module: the module
            target = target.rpartition(".")[0]
        if target in known and target != name:
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def test_the_parser_sees_imports_inside_functions(tmp_path):
    known = {"sirerag.a": tmp_path / "a.py", "sirerag.b": tmp_path / "b.py", "sirerag.c": tmp_path / "c" /
             "__init__.py", "sirerag.c.d": tmp_path / "c" / "d.py"}
    known["sirerag.a"].write_text("import os\nfrom sirerag.b import thing\n\ndef f():\n    from sirerag.c import d\n"
                                  "    import sirerag.c.d.x\n")
    assert imports("sirerag.a", known["sirerag.a"], known) == {"sirerag.b", "sirerag.c.d"}
    (tmp_path / "c").mkdir()
    known["sirerag.c.d"].write_text("def g():\n    from . import other\n    from .. import a\n")
    assert imports("sirerag.c.d", known["sirerag.c.d"], known) == {"sirerag.c", "sirerag.a"}
    with pytest.raises(graphlib.CycleError, match="nodes are in a cycle"):
        graphlib.TopologicalSorter({"sirerag.a": {"sirerag.b"}, "sirerag.b": {"sirerag.a"}}).prepare()


def test_no_import_circle_among_sirerag_modules():
    graph = import_graph()
    assert len(graph) > 100 and graph["sirerag.pipeline.build"] >= {"sirerag.pipeline.plan", "sirerag.engine"}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")
