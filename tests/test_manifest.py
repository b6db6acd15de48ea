"""The typed manifest (issue 27): ``Manifest.from_dict``/``to_dict`` give back a built and an updated index's
``manifest.json`` key for key, in order (so older sirerag versions still read what this one writes); a field
of the wrong type stops the load with one line naming the file and the field (a build may still replace that
index); unknown fields are kept; and no
module of ``sirerag/`` outside ``sirerag/core/io/manifest/`` reads a manifest as a raw dict (an AST check,
with a test that it catches what it must)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.core.io.guard import check_index_out
from sirerag.core.io.manifest import (Component, Drift, EmbedderRecord, FileRecord, Manifest, Resources,
                                      read_manifest)
from sirerag.pool.loaded import load_index

PACKAGE = Path(__file__).resolve().parents[1] / "sirerag"
OWNER = PACKAGE / "core" / "io" / "manifest"
#: The top-level keys a build wrote before the manifest was typed (sirerag 0.1.0, format 2), in order.
BUILD_KEYS = ["format", "format_version", "sirerag_version", "config", "corpus", "components", "embedder",
              "summarizer", "llm", "extractor", "counts", "timings", "files"]
#: What a build writes now: the same, with the build's peak memory after its times.
WRITTEN_KEYS = BUILD_KEYS[:-1] + ["resources", "files"]
#: Calls that return a manifest.
MAKERS = {"read_manifest", "parse_manifest", "write_manifest", "refresh_files", "register_component"}
#: Methods of a dict that read or change it.
DICT_METHODS = {"get", "setdefault", "pop", "update", "clear", "items", "keys", "values", "copy"}
#: The manifest's inner records that modules once read as dicts (a component's ``info`` is the third).
RECORDS = {"config", "counts"}


def _is_manifest(node: ast.AST) -> bool:
    """An expression that holds a manifest: a name or attribute called ``manifest`` (or ``*_manifest``), or
    a call of a function that returns one."""
    if isinstance(node, ast.Name):
        return node.id == "manifest" or node.id.endswith("_manifest")
    if isinstance(node, ast.Attribute):
        return node.attr == "manifest" or node.attr.endswith("_manifest")
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in MAKERS
    return False


def _is_raw(node: ast.AST) -> bool:
    """A manifest (:func:`_is_manifest`) or one of its inner records: ``m.config``, ``m.counts``, an entry of
    ``m.history`` (``m.history[i]``), any ``x.info`` (a component's), or ``(m.config or {})``."""
    if _is_manifest(node):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr == "info" or (node.attr in RECORDS and _is_manifest(node.value))
    if isinstance(node, ast.Subscript):
        value = node.value
        return isinstance(value, ast.Attribute) and value.attr == "history" and _is_manifest(value.value)
    if isinstance(node, ast.BoolOp):
        return any(_is_raw(v) for v in node.values)
    return False


def raw_reads(source: str) -> list[int]:
    """Lines where ``source`` reads a manifest or an inner record (:func:`_is_raw`) as a dict: ``m[...]``,
    ``m.get(...)`` and the other dict methods, ``"key" in m``, ``{**m}``, ``dict(m)``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_raw(node.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in DICT_METHODS and _is_raw(node.func.value):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and \
                any(_is_raw(a) for a in node.args):
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and \
                any(_is_raw(c) for c in node.comparators):
            lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and any(k is None and _is_raw(v) for k, v in zip(node.keys, node.values)):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_check_catches_raw_reads_of_a_manifest():
    source = "\n".join([
        'a = index.manifest["files"]',
        'b = manifest.get("embedder", {})',
        'c = read_manifest(path)["files"]',
        'd = {**self.manifest, "x": 1}',
        'e = "files" in old_manifest',
        'f = dict(index.manifest)',
        'index.manifest.setdefault("components", {})',
        # the inner records read as dicts (the reads these records replaced)
        'k = manifest.counts.get("relatedness_tree") or {}',
        'if "aggregate_vectors" not in (old.manifest.config or {}).get("relatedness", {}): pass',
        'stats = graph.info.get("stats") or {} if graph is not None else {}',
        'rows = component.info["rows"]',
        'n = index.manifest.history[0]["documents_added"]',
        'c = dict(manifest.config)',
        # typed reads pass
        'g = index.manifest.files["entries.jsonl"].size',
        'h = manifest.component("graph")',
        'i = manifest.embedder.dim if manifest.embedder else None',
        'j = "entries.jsonl" in manifest.files',
        'l = manifest.counts.relatedness_tree.variant',
        'm = manifest.history[0].documents_added',
        'o = index.component("graph").stats.linked_titles',
        'logger.info("%d entries", n)',
    ])
    assert raw_reads(source) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]


def test_no_module_reads_the_manifest_as_a_raw_dict():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if OWNER in path.parents:
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}:{line}" for line in raw_reads(path.read_text(encoding="utf-8"))]
    assert not found, "raw dict reads of a manifest (use the typed Manifest of sirerag.core.io.manifest):\n" + \
        "\n".join(found)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A three-document index with both trees and the entity graph, then one document added (an update)."""
    import sirerag
    from _tiny_index import ROWS, write_corpus

    root = tmp_path_factory.mktemp("manifest")
    corpus = write_corpus(root / "corpus.jsonl", ROWS[:2])
    with sirerag.Index.build(corpus, root / "index", trees=["similarity", "relatedness"], graph=True) as index:
        built_text = (root / "index" / "manifest.json").read_text(encoding="utf-8")
        index.add(write_corpus(root / "more.jsonl", ROWS[2:]))
    return root / "index", built_text


def _round_trip(text: str) -> None:
    raw = json.loads(text)
    manifest = Manifest.from_dict(raw)
    assert json.dumps(manifest.to_dict()) == json.dumps(raw)  # the same keys, in the same order, the same values
    assert Manifest.from_dict(manifest.to_dict()) == manifest


def test_a_built_index_manifest_round_trips_key_for_key(built):
    _, text = built
    _round_trip(text)
    assert list(json.loads(text)) == WRITTEN_KEYS  # what older versions wrote and read, and the peak memory
    manifest = Manifest.from_dict(json.loads(text))
    assert manifest.trees == ("similarity", "relatedness") and manifest.build_config().graph.enabled
    assert isinstance(manifest.embedder, EmbedderRecord) and manifest.embedder.dim == 384
    assert manifest.embedder.loads_as == "minilm" and manifest.documents == 2 and manifest.llm is None
    graph = manifest.component("graph")
    assert isinstance(graph, Component) and graph.type == "entity_graph" and graph.path == "graph"
    embeddings = manifest.files["embeddings.npy"]
    assert isinstance(embeddings, FileRecord) and embeddings.dtype == "float32" and embeddings.shape[1] == 384
    assert manifest.files["entries.jsonl"].rows == embeddings.shape[0]
    assert manifest.drift is None and manifest.history == [] and manifest.extra == {}
    assert isinstance(manifest.resources, Resources) and manifest.resources.peak_rss_mib > 50
    stages = manifest.resources.stage_peak_rss_mib or {}
    assert set(stages) in (set(), set(manifest.timings))  # every stage's peak, where the system tells it
    assert all(0 < peak <= manifest.resources.peak_rss_mib for peak in stages.values())


def test_an_updated_index_manifest_round_trips_and_keeps_the_build_keys(built):
    index, built_text = built
    text = (index / "manifest.json").read_text(encoding="utf-8")
    _round_trip(text)
    keys = list(json.loads(text))
    assert keys == WRITTEN_KEYS[:-1] + ["history", "drift", "staleness", "files"]
    manifest = load_index(index).manifest
    assert [h.command for h in manifest.history] == ["add"] and manifest.documents == 3
    assert isinstance(manifest.drift, Drift) and manifest.drift.leaves_added == 1
    assert manifest.drift.leaves_at_full_build == 2 and manifest.drift.share == 0.3333
    before = Manifest.from_dict(json.loads(built_text))
    assert manifest.config == before.config and manifest.embedder == before.embedder  # the build's settings kept


def test_unknown_fields_are_kept_as_they_were(tmp_path):
    from sirerag.core.io import write_manifest

    write_manifest(tmp_path, later={"k": 1}, embedder={"spec": "st:x", "dim": 4, "pooling": "mean"})
    manifest = read_manifest(tmp_path)
    assert manifest.extra == {"later": {"k": 1}} and manifest.embedder.extra == {"pooling": "mean"}
    assert json.loads((tmp_path / "manifest.json").read_text())["later"] == {"k": 1}
    assert manifest.to_dict()["embedder"] == {"spec": "st:x", "dim": 4, "pooling": "mean"}


@pytest.mark.parametrize("change, message", [
    (lambda m: m["embedder"].update(dim="384"), r"manifest field 'embedder\.dim' must be an integer, got '384'"),
    (lambda m: m["files"]["entries.jsonl"].pop("size"), r"manifest field 'files\.entries\.jsonl\.size' is missing"),
    (lambda m: m["components"].update(graph=["graph"]), r"manifest field 'components\.graph' must be an object"),
    (lambda m: m.update(summarizer=3), r"manifest field 'summarizer' must be a string, got 3"),
    (lambda m: m.update(format_version="2"), r"manifest field 'format_version' must be an integer"),
    (lambda m: m["resources"].update(peak_rss_mib="1 GiB"),
     r"manifest field 'resources\.peak_rss_mib' must be a number, got '1 GiB'"),
    # the inner records: config, counts, history, a component's rows and the graph's stats
    (lambda m: m["config"].update(trees="similarity"), r"manifest field 'config\.trees' must be a list, got 'simil"),
    (lambda m: m["counts"]["relatedness_tree"].update(aggregation_rule=3),
     r"manifest field 'counts\.relatedness_tree\.aggregation_rule' must be a string, got 3"),
    (lambda m: m["history"][0].update(documents_added="1"),
     r"manifest field 'history\[0\]\.documents_added' must be an integer, got '1'"),
    (lambda m: m["components"]["proposition_vectors"].update(rows="3"),
     r"manifest field 'components\.proposition_vectors\.rows' must be an integer, got '3'"),
    (lambda m: m["components"]["graph"]["stats"].update(linked_titles=0.5),
     r"manifest field 'components\.graph\.stats\.linked_titles' must be an integer, got 0\.5"),
])
def test_a_bad_field_stops_the_load_with_one_line_naming_it(built, tmp_path, change, message):
    import shutil

    index = tmp_path / "index"
    shutil.copytree(built[0], index, ignore=shutil.ignore_patterns("cache"))
    manifest = json.loads((index / "manifest.json").read_text())
    change(manifest)
    (index / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=rf"^{index / 'manifest.json'}: {message}") as caught:
        load_index(index)
    assert "\n" not in str(caught.value)
    assert check_index_out(index) == index.resolve()  # a build may still replace it: the files it lists are its own
