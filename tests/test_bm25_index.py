"""The BM25 index stored at build time: round trip, loading by search, light imports, many queries."""
from __future__ import annotations

import io
import json
import os
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import IndexFormatError
from sirerag.core.io import write_manifest
from sirerag.pool.bm25 import (BM25_DIR, StoredScores, build_lexical_index, load_lexical_index, save_bm25,
                               save_lexical_index)
from sirerag.pool.store import flatten, save_pool
from sirerag.pool.loaded import load_index
from sirerag.retrievers import load_retriever
from sirerag.retrievers.bm25 import BM25Retriever
from sirerag.trees.base import TreeResult
from sirerag.core.types import Node

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["Who founded the Hudson's Bay Company?", "population of the Netherlands in 1600",
           "Tony Award for Best Actress in a Musical", "zzzqqq xyzzy", "river delta city port",
           "river river delta Company company"]


def _texts(n: int = 120) -> list[str]:
    with open(ROOT / "data" / "corpus.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(n), fh)]
    return [r["title"] + "\n" + r["text"] for r in rows]


def _index_dir(root: Path, *, with_bm25: bool = True) -> Path:
    """An index directory of leaves over data/ passages (random embeddings: BM25 does not read them)."""
    texts = _texts()
    nodes = [Node(id=Node.make_id("leaf", "similarity", 0, t, ()), text=t, kind="leaf", tree="similarity",
                  level=0, passages=(f"p{i}",)) for i, t in enumerate(texts)]
    vectors = np.random.default_rng(0).normal(size=(len(nodes), 8)).astype(np.float32)
    pool = flatten([TreeResult(nodes=tuple(nodes), embeddings=vectors)])
    save_pool(root, pool)
    components = {"bm25": save_bm25(root, texts)} if with_bm25 else {}
    write_manifest(root, components=components, embedder={"spec": "none"})
    return root


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25+", "bm25l"])
def test_saved_index_round_trips_to_identical_scores(tmp_path, method):
    built = build_lexical_index(_texts(), k1=1.2, b=0.7, method=method)
    save_lexical_index(built, tmp_path / "bm25")
    loaded = load_lexical_index(tmp_path / "bm25")
    # summed from the stored arrays without bm25s, except where absent terms score (bm25l, bm25+)
    assert isinstance(loaded.engine, StoredScores) is (method not in ("bm25+", "bm25l"))
    assert loaded.params == built.params == {"k1": 1.2, "b": 0.7, "method": method}
    assert loaded.stopwords == built.stopwords and "the" in loaded.stopwords
    for query in QUERIES:
        np.testing.assert_array_equal(loaded.scores(query), built.scores(query))
    assert np.count_nonzero(loaded.scores(QUERIES[0])) > 0
    for array in (tmp_path / "bm25").glob("*.npy"):  # plain arrays: nothing pickled
        assert np.load(array, allow_pickle=False).dtype != object
    assert not list((tmp_path / "bm25").glob("*.pkl")) and not (tmp_path / "bm25" / "corpus.jsonl").exists()


def test_missing_or_foreign_files_are_refused(tmp_path):
    save_lexical_index(build_lexical_index(_texts(10)), tmp_path / "bm25")
    (tmp_path / "bm25" / "vocab.index.json").unlink()
    with pytest.raises(IndexFormatError, match=r"BM25 index files missing: vocab\.index\.json"):
        load_lexical_index(tmp_path / "bm25")
    save_lexical_index(build_lexical_index(_texts(10)), tmp_path / "bm25")
    (tmp_path / "bm25" / "tokenizer.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(IndexFormatError, match="tokeniser version 99 is not 1; rebuild the index"):
        load_lexical_index(tmp_path / "bm25")
    save_lexical_index(build_lexical_index(_texts(10)), tmp_path / "bm25")
    np.save(tmp_path / "bm25" / "data.csc.index.npy", np.ones(3, dtype=np.float32), allow_pickle=False)
    with pytest.raises(IndexFormatError, match="stored BM25 arrays do not match each other; rebuild the index"):
        load_lexical_index(tmp_path / "bm25")


def test_search_loads_the_stored_index_and_an_old_index_is_refused(tmp_path, caplog):
    stored = load_retriever("bm25", load_index(_index_dir(tmp_path / "new")))
    old = load_index(_index_dir(tmp_path / "old", with_bm25=False))
    with pytest.raises(IndexFormatError, match=r"old was built by an older sirerag \(no stored BM25 index\): "
                                               r"rebuild it with sirerag "):
        load_retriever("bm25", old)
    assert not (tmp_path / "old" / BM25_DIR).exists()  # searching never writes the index
    rebuilt = BM25Retriever([e.id for e in old.pool.entries], [e.text for e in old.pool.entries])
    for query in QUERIES:
        assert stored.search(query, k=10) == rebuilt.search(query, k=10)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sirerag.retrievers.bm25"):
        other = load_retriever("bm25", load_index(tmp_path / "new"), k1=0.9)
    assert "indexing in memory" in caplog.text and other.lexical.params["k1"] == 0.9


def test_a_filtered_pool_is_indexed_in_memory_not_refused(tmp_path, caplog):
    """A pool restricted after loading (e.g. to some entries) no longer matches the stored index."""
    from dataclasses import replace

    from sirerag.core.types import Pool

    index = load_index(_index_dir(tmp_path / "idx"))
    keep = list(range(0, len(index.pool.entries), 2))
    half = replace(index, pool=Pool(entries=tuple(index.pool.entries[i] for i in keep),
                                    embeddings=index.pool.embeddings[keep]))
    with caplog.at_level(logging.INFO, logger="sirerag.retrievers.bm25"):
        retriever = load_retriever("bm25", half)
    assert "a filtered pool" in caplog.text
    kept = {e.id for e in half.pool.entries}
    hits = retriever.search(QUERIES[0], k=10)
    assert hits and {h.entry_id for h in hits} <= kept


def test_bm25_search_imports_neither_torch_nor_sklearn_nor_bm25s(tmp_path):
    index = _index_dir(tmp_path / "index")
    code = ("import json, sys\nfrom sirerag.cli.main import main\n"
            f"rc = main(['search', {str(index)!r}, 'Hudson Bay Company founder', '--retriever', 'bm25', '--json'])\n"
            "heavy = sorted(m for m in ('torch', 'sklearn', 'transformers', 'sentence_transformers', 'umap', "
            "'bm25s', 'numba') "
            "if m in sys.modules)\n"
            "print(json.dumps({'rc': rc, 'heavy': heavy}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"rc": 0, "heavy": []}
    assert json.loads(lines[0])["hits"][0]["rank"] == 1


def test_many_queries_give_the_hits_of_single_queries(tmp_path, capsys, monkeypatch):
    index = str(_index_dir(tmp_path / "index"))
    single = []
    for query in QUERIES:
        assert main(["search", index, query, "-k", "5", "--retriever", "bm25", "--json"]) == 0
        [one] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # one line per query
        single.append(one["hits"])
    queries = tmp_path / "queries.txt"
    queries.write_text("\n".join(QUERIES[:2]) + "\n\n" + "\n".join(QUERIES[2:]) + "\n", encoding="utf-8")
    assert main(["search", index, "--queries", str(queries), "-k", "5", "--retriever", "bm25", "--json"]) == 0
    many = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [m["query"] for m in many] == QUERIES and [m["line"] for m in many] == [1, 2, 4, 5, 6, 7]
    assert [m["hits"] for m in many] == single
    monkeypatch.setattr(sys, "stdin", io.StringIO(queries.read_text(encoding="utf-8")))
    assert main(["search", index, "--queries", "-", "-k", "5", "--retriever", "bm25", "--json"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == many


def test_query_and_queries_are_exclusive(tmp_path, capsys):
    index = str(_index_dir(tmp_path / "index"))
    assert main(["search", index, "--retriever", "bm25"]) == 1
    assert "give either a QUERY or --queries FILE" in capsys.readouterr().err
    assert main(["search", index, "--queries", str(tmp_path / "absent.txt"), "--retriever", "bm25"]) == 1
    assert "absent.txt: cannot read queries" in capsys.readouterr().err


_WRITE_BM25 = """
import hashlib, json, pathlib, sys
from sirerag.pool.bm25 import save_bm25
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")][:120]
out = pathlib.Path(sys.argv[2])
save_bm25(out, texts)
print(json.dumps({p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "bm25").iterdir())}))
"""


def test_stored_files_do_not_depend_on_the_hash_seed(tmp_path):
    """bm25s builds its vocabulary from a set: the stored files must not follow the process's hash seed."""
    digests = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        run = subprocess.run([sys.executable, "-c", _WRITE_BM25, str(ROOT / "data" / "corpus.jsonl"),
                              str(tmp_path / seed)], capture_output=True, text=True, env=env, check=True)
        digests.append(json.loads(run.stdout))
    assert digests[0] == digests[1] and "vocab.index.json" in digests[0]
