"""``sirerag add`` / ``sirerag remove`` (issue 15): an index updated in place stays valid and
consistent, keeps the ids of what did not change, refuses unknown ids without changing anything,
survives SIGKILL, and a repeated add costs nothing.

The index tests build once on 32 documents of ``data/`` (both trees and the graph) and add 8 more
(the 80/20 split of the issue); nothing here is timed.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import _kills as kills
import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.config import ClusteringConfig
from sirerag.core.errors import InputError
from sirerag.corpus.load import load_corpus
from sirerag.core.io.manifest import Drift, Manifest
from sirerag.pipeline.changes import plan_changes, record_change
from sirerag.pipeline.update import update_index
from sirerag.pipeline.verify import verify_index
from sirerag.pool.loaded import load_index
from sirerag.trees.base import CountingSummarizer
from sirerag.trees.incremental import update_tree
from sirerag.core.types import Document, Node

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ["--quiet", "--seed", "7"]


def counting_summarizer() -> CountingSummarizer:
    """The offline summariser, counting the summaries it is asked for (``groups``)."""
    from sirerag.trees.extractive import ExtractiveSummarizer

    return CountingSummarizer(ExtractiveSummarizer(max_tokens=100))


_snapshot = kills.index_files


def _consistent(index: Path) -> dict[str, Node]:
    """Verify the index and check every node's children and passages; returns the pool by id."""
    verify_index(index)
    pool = {e.id: e for e in load_index(index).pool.entries}
    parents: set[str] = set()
    for node in pool.values():
        if not node.children:
            continue
        kids = [pool[c] for c in node.children]  # KeyError: a child missing from the pool
        assert all(k.tree == node.tree and k.level == node.level - 1 for k in kids), node.id
        assert set(node.passages) == {p for k in kids for p in k.passages}, node.id
        parents.update(node.children)
    tops = {t: max(n.level for n in pool.values() if n.tree == t) for t in {n.tree for n in pool.values()}}
    orphans = [n.id for n in pool.values() if n.level < tops[n.tree] and n.id not in parents
               and n.kind in ("leaf", "aggregate", "summary")]
    assert not orphans, orphans[:5]  # every node below a tree's top level has a parent
    return pool


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("incremental")
    lines = (ROOT / "data" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (root / "old.jsonl").write_text("\n".join(lines[:32]) + "\n", encoding="utf-8")
    (root / "new.jsonl").write_text("\n".join(lines[32:40]) + "\n", encoding="utf-8")
    base = root / "base"
    assert main(["build", str(root / "old.jsonl"), "--out", str(base), "--graph", *SETTINGS]) == 0
    return root


def _copy(corpora: Path, name: str) -> Path:
    target = corpora / name
    shutil.copytree(corpora / "base", target)
    return target


@pytest.mark.slow
def test_add_the_last_fifth_gives_a_valid_consistent_index(corpora, capsys):
    index = _copy(corpora, "added")
    before = _consistent(index)
    assert main(["add", str(index), str(corpora / "new.jsonl"), "--quiet"]) == 0
    pool = _consistent(index)
    new_ids = {d.id for d in load_corpus(corpora / "new.jsonl")}
    leaves = [n for n in pool.values() if n.kind == "leaf"]
    assert new_ids <= {p for n in leaves for p in n.passages}  # every new passage is in the pool
    assert new_ids <= {p for n in pool.values() if n.kind == "summary" for p in n.passages}  # and in a summary
    assert {n.id for n in before.values() if n.kind == "leaf"} <= set(pool)  # old leaves keep their ids
    kept = [i for i, n in before.items() if n.kind == "summary" and i in pool]
    assert kept, "an add of 8 documents re-summarised every cluster"
    manifest = load_index(index).manifest
    assert [h.command for h in manifest.history] == ["add"]
    assert manifest.history[0].documents_added == 8
    drift = manifest.drift
    assert drift.leaves_removed == 0 and drift.share == round(
        drift.leaves_added / (drift.leaves_at_full_build + drift.leaves_added), 4) > 0
    graph = json.loads((index / "graph" / "graph.json").read_text())["stats"]
    assert graph["passage_nodes"] == 40  # the graph was rebuilt over all documents
    pool_ids = set(pool)
    assert drift.summaries_stale == len(manifest.staleness) > 0  # the default --refresh-threshold kept some
    assert set(manifest.staleness) <= pool_ids
    assert main(["stats", str(index)]) == 0
    out = capsys.readouterr().out
    assert f"{drift.share:.1%} of its leaves (+{drift.leaves_added} -0; 1 add/remove run(s))" in out
    assert f"stale summaries                 {drift.summaries_stale} (kept their text, members changed)" in out


@pytest.mark.slow
def test_a_second_identical_add_calls_no_summariser_and_changes_nothing(corpora):
    index = _copy(corpora, "twice")
    first = counting_summarizer()
    report = update_index(index, add=corpora / "new.jsonl", summarizer=first)
    assert report.changed and first.groups == report.counts["summaries_written"] > 0
    snapshot = _snapshot(index)
    second = counting_summarizer()
    again = update_index(index, add=corpora / "new.jsonl", summarizer=second)
    assert not again.changed and again.counts["documents_skipped"] == 8
    assert second.groups == 0
    assert _snapshot(index) == snapshot


@pytest.mark.slow
def test_removing_an_unknown_id_changes_nothing(corpora, capsys):
    index = corpora / "base"
    snapshot = _snapshot(index)
    known = load_index(index).documents()[0].id
    with pytest.raises(InputError, match=r"2 document id\(s\) not in the index: nope-1, nope-2; nothing was changed"):
        update_index(index, remove=[known, "nope-1", "nope-2"])
    assert main(["remove", str(index), "--ids", "nope-1"]) == 1
    assert "not in the index: nope-1" in capsys.readouterr().err
    assert _snapshot(index) == snapshot


@pytest.mark.slow
def test_remove_then_add_gives_back_the_same_ids_for_unchanged_nodes(corpora):
    index = _copy(corpora, "roundtrip")
    base = _consistent(index)
    docs = load_index(index).documents()
    gone = [d.id for d in docs[5:9]]
    ids_file = corpora / "gone.txt"
    ids_file.write_text("\n".join(gone) + "\n", encoding="utf-8")
    assert main(["remove", str(index), "--ids-file", str(ids_file), "--quiet"]) == 0
    removed = _consistent(index)
    assert not any(set(n.passages) & set(gone) for n in removed.values())
    untouched = {i for i, n in base.items() if not set(n.passages) & set(gone)}
    assert untouched <= set(removed)  # a removal rewrites only the nodes above the removed documents
    back = corpora / "back.jsonl"
    back.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in docs[5:9]), encoding="utf-8")
    assert main(["add", str(index), str(back), "--quiet"]) == 0
    final = _consistent(index)
    level0 = {i for i, n in base.items() if n.kind == "leaf" or (n.kind == "aggregate" and i in untouched)}
    assert level0 <= set(final)  # every leaf (re-added ones too) and every untouched aggregate: same id
    summaries = [i for i in untouched if base[i].kind == "summary"]
    assert summaries and sum(i in final for i in summaries) >= len(summaries) // 2
    history = load_index(index).manifest.history
    assert [(h.command, h.documents_removed, h.documents_added) for h in history] == \
        [("remove", 4, 0), ("add", 0, 4)]
    assert sum(h.summaries_stale or 0 for h in history) > 0  # the round trip went through stale summaries


DRIVER = kills.driver(run=kills.ADD)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["end:pool", "commit:swap"])  # end:pool: the new pool is staged, not committed
def test_an_add_killed_halfway_leaves_the_old_index_and_the_rerun_completes(corpora, point):
    index = _copy(corpora, f"killed-{point.replace(':', '-')}")
    snapshot = _snapshot(index)
    proc = kills.start(DRIVER, point, [str(index), str(corpora / "new.jsonl")])
    kills.stop_at(proc, point)
    kills.kill(proc)
    assert _snapshot(index) == snapshot  # the old index, byte for byte
    assert len(load_index(index).documents()) == 32
    assert main(["add", str(index), str(corpora / "new.jsonl"), "--quiet"]) == 0
    assert len(_consistent(index)) > 0 and len(load_index(index).documents()) == 40
    assert not list(index.parent.glob(f".{index.name}.stage-*"))  # the rerun cleaned up the killed stage


def test_drift_stays_a_share_after_many_adds_and_removes():
    plan = plan_changes([Document(id="a", text="one")], add=[Document(id="b", text="two")])
    manifest = Manifest()
    shares = [record_change(manifest, command="add", plan=plan, leaves_before=3, leaves_added=4, leaves_removed=0,
                            summaries_written=0, chunks_extracted=0)["share"]]
    assert shares == [0.5714]  # 4 of the 7 leaves held since the build were added (was 133%: 4 over the build's 3)
    shares.append(record_change(manifest, command="add", plan=plan, leaves_before=7, leaves_added=30,
                                leaves_removed=0, summaries_written=0, chunks_extracted=0)["share"])
    shares.append(record_change(manifest, command="remove", plan=plan, leaves_before=37, leaves_added=0,
                                leaves_removed=37, summaries_written=0, chunks_extracted=0)["share"])
    assert shares == [0.5714, 0.9189, 1.0] and manifest.drift.leaves_removed == 37
    old = Drift.from_dict({"leaves_at_full_build": 3, "leaves_added": 4, "share": 1.3333})  # an earlier version's
    assert old.measured_share == 0.5714  # what stats shows for it


def test_plan_skips_same_text_updates_changed_text_and_names_unknown_ids():
    old = [Document(id="a", text="one"), Document(id="b", text="two"), Document(id="c", text="three")]
    plan = plan_changes(old, add=[Document(id="a", text="one"), Document(id="b", text="TWO"),
                                  Document(id="d", text="four")], remove=["c"])
    assert plan.skipped == 1 and plan.updated == ("b",)
    assert [d.id for d in plan.documents] == ["a", "b", "d"] and plan.documents[1].text == "TWO"
    assert plan.removed == {"b", "c"}
    with pytest.raises(InputError, match=r"not in the index: x, y"):
        plan_changes(old, remove=["a", "x", "y"])
    manifest = Manifest()
    record_change(manifest, command="add", plan=plan, leaves_before=10, leaves_added=2, leaves_removed=1,
                  summaries_written=3, chunks_extracted=2)
    drift = record_change(manifest, command="remove", plan=plan, leaves_before=99, leaves_added=0,
                          leaves_removed=2, summaries_written=1, chunks_extracted=0, summaries_stale=2,
                          stale_in_index=5, refresh_threshold=0.2)
    assert drift == {"leaves_at_full_build": 10, "leaves_added": 2, "leaves_removed": 3, "share": 0.4167,
                     "summaries_stale": 5}
    assert manifest.history[1].summaries_stale == 2 and manifest.history[1].refresh_threshold == 0.2
    assert len(manifest.history) == 2 and manifest.drift.to_dict() == drift


class _Embed:
    """Embeds a summary as the normalised sum of the one-hot rows of the letters it names."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        rows = [sum(self.table[w] for w in t.split()) for t in texts]
        return np.vstack([r / np.linalg.norm(r) for r in rows])


class _Join:
    spec = "test:join"

    def summarize(self, groups):  # noqa: ANN001, ANN201
        return [" ".join(sorted({w for t in g for w in t.split()})) for g in groups]


def test_new_leaves_join_the_cluster_they_fit_and_others_start_their_own():
    axes = np.eye(8, dtype=np.float32)
    near = {"a1": axes[0] + 0.1 * axes[1], "a2": axes[0] + 0.1 * axes[2], "b1": axes[3] + 0.1 * axes[4],
            "b2": axes[3] + 0.1 * axes[5], "a3": axes[0] + 0.05 * axes[1], "z": axes[7]}
    table = {k: v / np.linalg.norm(v) for k, v in near.items()}
    leaf = {k: Node(id=k, text=k, kind="leaf", tree="similarity", level=0, passages=(k,)) for k in table}
    summarizer, embedder = _Join(), _Embed(table)
    s_a = Node(id="sa", text="a1 a2", kind="summary", tree="similarity", level=1, children=("a1", "a2"),
               passages=("a1", "a2"))
    s_b = Node(id="sb", text="b1 b2", kind="summary", tree="similarity", level=1, children=("b1", "b2"),
               passages=("b1", "b2"))
    vectors = dict(table)
    vectors.update(sa=embedder.encode_documents(["a1 a2"])[0], sb=embedder.encode_documents(["b1 b2"])[0])
    old = [[leaf["a1"], leaf["a2"], leaf["b1"], leaf["b2"]], [s_a, s_b]]
    base = [leaf[k] for k in ("a1", "a2", "b1", "b2", "a3", "z")]
    levels, stats = update_tree(old, base, vectors, tree_name="similarity", embedder=embedder, summarizer=summarizer,
                                clustering=ClusteringConfig(), levels=2, random_state=0)
    children = {n.children for n in levels[1]}
    assert children == {("a1", "a2", "a3"), ("b1", "b2"), ("z",)}  # a3 joined a's cluster, z started its own
    assert s_b in levels[1] and s_a not in levels[1]  # b's summary was kept (same id), a's written again
    assert (stats.joined, stats.new_clusters, stats.summaries_written) == (1, 1, 2)
    levels, stats = update_tree(old, [leaf[k] for k in ("a1", "b1", "b2")], vectors, tree_name="similarity",
                                embedder=embedder, summarizer=summarizer, clustering=ClusteringConfig(), levels=2,
                                random_state=0)
    assert {n.children for n in levels[1]} == {("a1",), ("b1", "b2")} and stats.summaries_written == 1


def _two_clusters_under_a_root():
    """Leaves a1..a2 and b1..b4 (one-hot directions, 2 tokens each) in two level-1 clusters under a root."""
    axes = np.eye(10, dtype=np.float32)
    near = {"a1": axes[0] + 0.1 * axes[1], "a2": axes[0] + 0.1 * axes[2], "a3": axes[0] + 0.05 * axes[1],
            "b1": axes[3] + 0.1 * axes[4], "b2": axes[3] + 0.1 * axes[5], "b3": axes[3] + 0.1 * axes[6],
            "b4": axes[3] + 0.1 * axes[7], "b5": axes[3] + 0.01 * axes[4], "b6": axes[3] + 0.01 * axes[5]}
    table = {k: v / np.linalg.norm(v) for k, v in near.items()}
    leaf = {k: Node(id=k, text=k, kind="leaf", tree="similarity", level=0, passages=(k,)) for k in table}
    embedder = _Embed(table)
    s_a = Node(id="sa", text="a1 a2", kind="summary", tree="similarity", level=1, children=("a1", "a2"),
               passages=("a1", "a2"))
    s_b = Node(id="sb", text="b1 b2 b3 b4", kind="summary", tree="similarity", level=1,
               children=("b1", "b2", "b3", "b4"), passages=("b1", "b2", "b3", "b4"))
    root = Node(id="r", text="a1 a2 b1 b2 b3 b4", kind="summary", tree="similarity", level=2, children=("sa", "sb"),
                passages=s_a.passages + s_b.passages)
    vectors = dict(table)
    vectors.update(zip(("sa", "sb", "r"), embedder.encode_documents([s_a.text, s_b.text, root.text])))
    old = [[leaf[k] for k in ("a1", "a2", "b1", "b2", "b3", "b4")], [s_a, s_b], [root]]
    return old, leaf, vectors, embedder


def _update(old, base, vectors, embedder, threshold, staleness):
    summarizer = CountingSummarizer(_Join())
    levels, stats = update_tree(old, base, vectors, tree_name="similarity", embedder=embedder, summarizer=summarizer,
                                clustering=ClusteringConfig(), levels=3, random_state=0, refresh_threshold=threshold,
                                staleness=staleness)
    return levels, stats, summarizer


def test_a_cluster_below_the_refresh_threshold_keeps_its_summary_and_gets_the_new_children():
    old, leaf, vectors, embedder = _two_clusters_under_a_root()
    base = old[0] + [leaf["a3"], leaf["b5"]]  # a3 is 1/3 of a's tokens, b5 1/5 of b's
    staleness: dict[str, int] = {}
    levels, stats, summarizer = _update(old, base, vectors, embedder, 0.25, staleness)
    by_text = {n.text: n for n in levels[1]}
    assert set(by_text) == {"a1 a2 a3", "b1 b2 b3 b4"}  # a (1/3 > 0.25) written again, b (1/5) kept its text
    b = by_text["b1 b2 b3 b4"]
    assert b.children == ("b1", "b2", "b3", "b4", "b5") and b.passages == b.children  # children exact
    assert b.id == Node.make_id("summary", "similarity", 1, b.text, b.children) != "sb"  # id of text + children
    assert np.array_equal(vectors[b.id], vectors["sb"])  # its stored row, not embedded again
    (root,) = levels[2]  # its members' texts changed by " a3" (2 of their 14 tokens): kept, with the new children
    assert root.text == "a1 a2 b1 b2 b3 b4" and root.children == tuple(n.id for n in levels[1])
    assert staleness == {b.id: 2, root.id: 2} and (stats.summaries_stale, stats.summaries_written) == (2, 1)
    assert summarizer.groups == 1  # a only
    # a second add to b: 2 + 2 changed tokens of 12 is past 0.25, so b is written again, and so is the root
    # (2 + 4 changed tokens of 18); both are up to date again
    levels2, stats2, summarizer2 = _update(levels, levels[0] + [leaf["b6"]], vectors, embedder, 0.25, staleness)
    assert {n.text for n in levels2[1]} == {"a1 a2 a3", "b1 b2 b3 b4 b5 b6"}
    assert levels2[2][0].text == "a1 a2 a3 b1 b2 b3 b4 b5 b6"
    assert (stats2.summaries_stale, summarizer2.groups) == (0, 2) and staleness == {}


def test_only_stale_children_below_keep_the_parent_text_and_threshold_zero_rewrites_every_changed_cluster():
    old, leaf, vectors, embedder = _two_clusters_under_a_root()
    levels, stats, summarizer = _update(old, old[0] + [leaf["b5"]], vectors, embedder, 0.25, {})
    (root,) = levels[2]
    assert root.text == "a1 a2 b1 b2 b3 b4" and root.children == ("sa", levels[1][1].id)  # same member texts
    assert (stats.summaries_stale, stats.summaries_same_text, summarizer.groups) == (1, 1, 0)
    assert set(root.passages) == {"a1", "a2", "b1", "b2", "b3", "b4", "b5"}
    levels, stats, summarizer = _update(old, old[0] + [leaf["b5"]], vectors, embedder, 0.0, {})
    assert [n.text for n in levels[1]] == ["a1 a2", "b1 b2 b3 b4 b5"] and levels[1][0].id == "sa"
    assert levels[2][0].text == "a1 a2 b1 b2 b3 b4 b5"
    assert (stats.summaries_stale, stats.summaries_written, summarizer.groups) == (0, 2, 2)


def test_the_refresh_threshold_is_validated_before_anything_is_read(tmp_path):
    from sirerag.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"update.refresh_threshold \(--refresh-threshold\) must be a share between "
                                          r"0 and 1, got 1.5"):
        update_index(tmp_path / "none", remove=["x"], refresh_threshold=1.5)
    with pytest.raises(ConfigError, match=r"update.refresh_threshold must be a number, got '0.2'"):
        update_index(tmp_path / "none", remove=["x"], refresh_threshold="0.2")  # type: ignore[arg-type]
    assert not (tmp_path / "none").exists()


def test_the_cli_refuses_a_negative_refresh_threshold(tmp_path, capsys):
    assert main(["remove", str(tmp_path / "none"), "--ids", "x", "--refresh-threshold", "-0.1"]) == 1
    assert "update.refresh_threshold (--refresh-threshold) must be a share between 0 and 1, got -0.1" in \
        capsys.readouterr().err
    assert not (tmp_path / "none").exists()
