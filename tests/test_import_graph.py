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


#: The layers, bottom first (docs/architecture.md "Layers"); a module may import from its own layer and those
#: below it. The package root (``sirerag/__init__.py``: the version and lazy public names) is below them all.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("sirerag.core",)),
    ("corpus", ("sirerag.corpus",)),
    ("text", ("sirerag.text",)),
    ("backends", ("sirerag.llm", "sirerag.embedding", "sirerag.engine")),
    ("extraction", ("sirerag.extraction",)),
    ("clustering", ("sirerag.clustering",)),
    ("trees", ("sirerag.trees",)),
    ("pool", ("sirerag.pool",)),
    ("graph", ("sirerag.graph",)),
    ("pipeline", ("sirerag.pipeline",)),
    ("retrievers", ("sirerag.retrievers",)),
    ("evaluation", ("sirerag.evaluation", "sirerag.datasets")),
    ("report", ("sirerag.report",)),
    ("api", ("sirerag.api", "sirerag.api_checks", "sirerag.answers", "sirerag.results")),
    ("front", ("sirerag.cli", "sirerag.integrations", "sirerag.serve", "sirerag.__main__")),
]


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the layer holding ``module`` (-1 for the package root)."""
    if module == "sirerag":
        return -1
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_every_module_sits_in_a_layer_and_imports_only_downwards():
    graph = import_graph()
    homeless = sorted(m for m in graph if layer_of(m) is None)
    assert not homeless, f"modules in no layer (add a folder to LAYERS and docs/architecture.md): {homeless}"
    upward = sorted(f"{m} ({LAYERS[layer_of(m)][0]}) -> {t} ({LAYERS[layer_of(t)][0]})"
                    for m, targets in graph.items() for t in targets if layer_of(t) > layer_of(m))
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)
    assert layer_of("sirerag.pool.bm25") < layer_of("sirerag.graph.query_aids") < layer_of("sirerag.cli.main")


def test_the_layer_check_catches_an_upward_import(tmp_path):
    assert layer_of("sirerag.core.io.guard") == 0 and layer_of("sirerag.pool.store") == 7
    assert layer_of("sirerag.somewhere_new") is None
    up = tmp_path / "low.py"
    up.write_text("def f():\n    from sirerag.retrievers import load_retriever\n")
    known = {"sirerag.core.low": up, "sirerag.retrievers": tmp_path / "r.py"}
    (target,) = imports("sirerag.core.low", up, known)
    assert layer_of(target) > layer_of("sirerag.core.low")
