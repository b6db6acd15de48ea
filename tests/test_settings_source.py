"""The default retriever's settings have one source: :class:`~sirerag.core.config.retrieval.PPRSettings` (issue 45).

Every default lives in one field, with one check and one description; the options of ``ppr.load``, the pool
options, the ``sirerag search`` flags, what a search reports and the settings table of docs/ppr.md derive from the
fields, and no other module of the package restates a default: a keyword default, a keyword argument, a dict
entry or a class attribute named like a setting and holding its default value fails here, naming file and line.
"""
from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from sirerag.core.config import GraphConfig
from sirerag.core.config.retrieval import (
    BRIDGE_PREFIX, BridgeSettings, PoolRule, PPRSettings, doc_of, options, settings_table)
from sirerag.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sirerag"
#: where the settings are defined (and the build settings the graph records, ``graph.damping``...)
SOURCE = PACKAGE / "core" / "config"


def defaults() -> dict[str, object]:
    """Setting name -> default: every search option, the bridge fields under their own names too, and the graph's
    PageRank settings."""
    out: dict[str, object] = {name: value for name, _, value in options() if value is not None}
    out.update({f.name: f.default for f in fields(BridgeSettings)})
    # the PageRank settings default to the ones the build records with the graph
    out.update({name: getattr(GraphConfig(), name) for name in ("damping", "tol", "max_iter")})
    return out


def restated(path: Path, known: dict[str, object]) -> list[str]:
    """``file:line name=value`` of every place in ``path`` that names a setting and gives it its default."""
    def same(name: str, node: ast.AST | None) -> bool:
        if not isinstance(node, ast.Constant) or node.value is None or name not in known:
            return False
        default = known[name]
        return type(node.value) is type(default) and node.value == default or (
            isinstance(default, float) and not isinstance(node.value, bool) and isinstance(node.value, int)
            and float(node.value) == default)

    out: list[tuple[int, str]] = []
    where = path.relative_to(ROOT)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[str, ast.AST | None, int]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs += [(arg.arg, d, node.lineno) for arg, d in zip(positional[len(positional) - len(a.defaults):],
                                                                 a.defaults)]
            pairs += [(arg.arg, d, node.lineno) for arg, d in zip(a.kwonlyargs, a.kw_defaults)]
        elif isinstance(node, ast.Call):
            pairs += [(k.arg, k.value, k.value.lineno) for k in node.keywords if k.arg]
        elif isinstance(node, ast.Dict):
            pairs += [(k.value, v, v.lineno) for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            pairs.append((node.target.id, node.value, node.lineno))
        out += [(line, f"{where}:{line} {name}={ast.unparse(value)}") for name, value, line in pairs
                if same(name, value)]
    return [hit for _, hit in sorted(out)]


def test_no_module_restates_a_default_of_the_default_retriever():
    known = defaults()
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if SOURCE not in path.parents
             for hit in restated(path, known)]
    assert not found, "defaults of PPRSettings restated outside sirerag/core/config/:\n" + "\n".join(found)


def test_the_scan_finds_a_restated_default(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def load(*, passage_weight=0.05, bridge_top=4):\n    return dict(leaf_share=0.8)\n"
                      "TABLE = {'lift_ratio': 5.0, 'other': 5.0}\nclass C:\n    hops: int = 2\n", encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        found = restated(module, defaults())
    finally:
        ROOT = saved
    assert found == ["m.py:1 passage_weight=0.05", "m.py:2 leaf_share=0.8", "m.py:3 lift_ratio=5.0",
                     "m.py:5 hops=2"]


def test_every_setting_has_one_description_and_one_check():
    for name, f, value in options():
        assert doc_of(f), f"{name} has no description"
    # a wrong type is refused naming the option, before anything loads
    for name, bad in (("passage_weight", -1.0), ("bm25_share", 2.0), ("top_facts", 0), ("bridge_hops", 4),
                      ("bridge_titles", 1), ("leaf_share", 1.5), ("lift_ratio", 0.5), ("pool_depth", 0),
                      ("linking", "nert"), ("damping", 1.0)):
        with pytest.raises(ConfigError, match=rf"^{name} must be "):
            PPRSettings.from_options(**{name: bad})
    with pytest.raises(ConfigError, match=r"does not take option\(s\) \['entry_score'\]"):
        PPRSettings.from_options(entry_score="mean")


def test_options_cli_flags_and_reports_come_from_the_fields():
    import argparse

    from sirerag.cli.search import add_retriever_options, retriever_options
    from sirerag.retrievers import POOL_OPTIONS, options_of
    from sirerag.retrievers.pool_rank import DESCRIBED

    names = set(PPRSettings.option_names())
    assert POOL_OPTIONS == set(PoolRule.option_names()) and set(DESCRIBED) <= POOL_OPTIONS
    assert options_of("ppr") - {"embedder", "tagger", "fact_filter"} == names - POOL_OPTIONS
    assert {BRIDGE_PREFIX + f.name for f in fields(BridgeSettings)} <= names
    parser = argparse.ArgumentParser()
    add_retriever_options(parser)
    flags = {a.dest: a for a in parser._actions}
    assert names <= set(flags)
    assert "(default 0.05)" in flags["passage_weight"].help and "0.8 for ppr, 0.9 otherwise" in flags["leaf_share"].help
    args = parser.parse_args(["--bridge-hops", "1", "--no-surface", "--leaf-share", "0.7", "--linking", "fact"])
    assert retriever_options(args) == {"bridge_hops": 1, "surface": False, "leaf_share": 0.7, "linking": "fact"}
    assert PPRSettings.from_options(**retriever_options(args)).pool.leaf_share == 0.7


def test_the_settings_table_of_docs_ppr_is_generated_from_the_fields():
    text = (ROOT / "docs" / "ppr.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- settings table: start -->\n(.*?)<!-- settings table: end -->", text, re.S)
    assert match, "docs/ppr.md has no generated settings table"
    assert match.group(1) == settings_table(), (
        "docs/ppr.md's settings table is out of date: replace it with the output of "
        "python -c 'from sirerag.core.config.retrieval import settings_table; print(settings_table(), end=\"\")'")
