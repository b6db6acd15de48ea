"""ColBERT retriever through colbert-ai, with a tiny real checkpoint built here.

The checkpoint is a 2-layer BERT with random weights and a WordPiece vocabulary
trained on the test passages; these tests prove the mechanics (index files and
manifest, id mapping, k, score order, reload, errors), not ranking quality.
colbert-ai's C++ extensions are compiled once into ``TORCH_EXTENSIONS_DIR``
(``~/.cache/sirerag/torch_extensions`` unless set), so reruns reuse them.
"""
from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

from sirerag.cli.main import main
from sirerag.core.errors import ConfigError, MissingExtraError, SireragError
from sirerag.core.io import write_manifest
from sirerag.pool.store import save_pool
from sirerag.pool.loaded import load_index
from sirerag.retrievers import Retriever, load_retriever
from sirerag.retrievers import colbert as colbert_mod
from sirerag.retrievers._colbert_client import WorkerClient
from sirerag.core.io import collection_text
from sirerag.retrievers.colbert import (
    ColBERTRetriever,
    colbert_indexes,
    resolve_checkpoint,
)
from sirerag.core.types import Node, Pool

DATA = Path(__file__).resolve().parents[1] / "data"
N_ENTRIES = 300


def _passages(n: int) -> list[dict]:
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh)]


def _make_index(directory: Path, rows: list[dict]) -> Path:
    """An index directory whose pool holds one leaf per passage (title and text, as the build writes them)."""
    entries = []
    for row in rows:
        text = f"{row['title']}\n{row['text']}"
        entries.append(Node(id=Node.make_id("leaf", "similarity", 0, text), text=text, kind="leaf",
                            tree="similarity", level=0, passages=(row["id"],)))
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(entries), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    directory.mkdir(parents=True)
    save_pool(directory, Pool(entries=tuple(entries), embeddings=vectors))
    write_manifest(directory, components={"pool": {"type": "pool"}})
    return directory


def make_tiny_checkpoint(out: Path, texts: list[str], *, hidden: int = 64, dim: int = 32) -> Path:
    """A ColBERT checkpoint colbert-ai can load: a BERT model whose state dict has ``bert.*``
    and ``linear.weight`` (colbert-ai's HF_ColBERT layout), a WordPiece tokenizer with
    ColBERT's ``[unused0]``/``[unused1]`` marker tokens, and ``artifact.metadata`` (ColBERT config)."""
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertPreTrainedModel, BertTokenizerFast

    out.mkdir(parents=True)
    wordpiece = BertWordPieceTokenizer(lowercase=True)
    wordpiece.train_from_iterator(texts, vocab_size=3000, show_progress=False, special_tokens=[
        "[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    wordpiece.save_model(str(out))
    tokenizer = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(out)

    class TinyColBERT(BertPreTrainedModel):
        def __init__(self, config: BertConfig) -> None:
            super().__init__(config)
            self.bert = BertModel(config, add_pooling_layer=False)
            self.linear = torch.nn.Linear(config.hidden_size, dim, bias=False)
            self.post_init()

    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=512)
    TinyColBERT(config).save_pretrained(out)
    (out / "artifact.metadata").write_text(json.dumps({"dim": dim, "query_maxlen": 32}), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def colbert_env():
    pytest.importorskip("colbert", reason="colbert-ai is not installed (pip install 'sirerag[colbert]')")
    colbert_mod.compile_extensions()  # in parallel; a quick no-op when they are cached


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, colbert_env):
    """(index directory, checkpoint folder, retriever): built once per session."""
    rows = _passages(N_ENTRIES)
    root = tmp_path_factory.mktemp("colbert")
    checkpoint = make_tiny_checkpoint(root / "ckpt", [f"{r['title']}\n{r['text']}" for r in rows])
    index_dir = _make_index(root / "index", rows)
    with pytest.raises(ConfigError, match=r"has no ColBERT index for this checkpoint .*build it with: "
                                          r"sirerag index .* --colbert "):
        load_retriever("colbert", load_index(index_dir), checkpoint=str(checkpoint))  # searching never builds
    assert load_index(index_dir).manifest.component("colbert") is None
    assert main(["index", str(index_dir), "--colbert", str(checkpoint)]) == 0
    retriever = load_retriever("colbert", load_index(index_dir), checkpoint=str(checkpoint))
    yield index_dir, checkpoint, retriever
    retriever.close()


@pytest.mark.slow
def test_build_writes_index_folder_and_manifest(tiny):
    index_dir, checkpoint, retriever = tiny
    index = load_index(index_dir)
    recorded = colbert_indexes(index.manifest)
    assert list(recorded) == [str(checkpoint.resolve())]
    record = recorded[str(checkpoint.resolve())]
    assert record["entries"] == len(index.pool) == N_ENTRIES
    assert record["nbits"] == 2 and record["doc_maxlen"] == 512 and record["passages"] == N_ENTRIES
    assert record["embeddings"] > N_ENTRIES * 20  # token embeddings, not one per entry
    folder = index_dir / record["path"]
    assert index.component("colbert") == index_dir / "colbert"
    assert json.loads((folder / "entry_ids.json").read_text()) == [e.id for e in index.pool.entries]
    lines = (folder / "collection.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == N_ENTRIES
    assert lines[5] == f"5\t{collection_text(index.pool.entries[5].text)}"
    assert (folder / "plaid" / "metadata.json").is_file()
    assert not [p for p in (index_dir / "colbert").iterdir() if p.name.startswith(".")]  # no build leftovers
    assert isinstance(retriever, Retriever) and retriever.name == "colbert"


@pytest.mark.slow
def test_search_maps_ids_respects_k_and_orders_scores(tiny):
    index_dir, _, retriever = tiny
    index = load_index(index_dir)
    queries = ["Who was the first governor of the province?", "American actress and singer born in 1975",
               "river that flows into the sea near the capital"]
    for k in (1, 5, 20):
        for hits in retriever.search_many(queries, k=k):
            assert 1 <= len(hits) <= k
            ids = [h.entry_id for h in hits]
            assert len(set(ids)) == len(ids)
            assert all(index.pool.get(i).passages for i in ids)  # every id is a pool entry
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
    assert len(retriever.search(queries[0], k=10)) == 10
    assert retriever.search_many([], k=5) == []
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        retriever.search(queries[0], k=0)


@pytest.mark.slow
def test_an_entrys_own_text_finds_it_first(tiny):
    index_dir, _, retriever = tiny
    entries = load_index(index_dir).pool.entries
    picked = entries[::30]
    results = retriever.search_many([e.text for e in picked], k=3)
    assert [hits[0].entry_id for hits in results] == [e.id for e in picked]


@pytest.mark.slow
def test_a_new_retriever_reloads_the_index_without_rebuilding(tiny, monkeypatch):
    index_dir, checkpoint, retriever = tiny
    manifest_before = (index_dir / "manifest.json").read_text()
    query = "a Norwegian football club founded in the 1900s"
    monkeypatch.chdir(index_dir.parent)  # a relative index path works too
    # checkpoint=None picks the one ColBERT index recorded for this pool
    with load_retriever("colbert", load_index(index_dir.name)) as again:
        assert again.folder == retriever.folder
        assert again.search(query, k=7) == retriever.search(query, k=7)
    assert (index_dir / "manifest.json").read_text() == manifest_before


@pytest.mark.slow
def test_index_command_keeps_an_up_to_date_index_and_search_refuses_a_stale_one(tiny, tmp_path, capsys):
    index_dir, checkpoint, _ = tiny
    manifest_before = (index_dir / "manifest.json").read_text()
    assert main(["index", str(index_dir), "--colbert", str(checkpoint)]) == 0
    assert "is up to date" in capsys.readouterr().out
    assert (index_dir / "manifest.json").read_text() == manifest_before
    stale = tmp_path / "stale"
    shutil.copytree(index_dir, stale)
    manifest = json.loads((stale / "manifest.json").read_text())
    manifest["components"]["colbert"]["indexes"][str(checkpoint.resolve())]["entries_sha1"] = "0" * 40
    (stale / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"out of date with the pool .*build it with: sirerag index .*stale"):
        load_retriever("colbert", load_index(stale), checkpoint=str(checkpoint))


@pytest.mark.slow
def test_a_broken_index_raises_with_the_workers_error(tiny, tmp_path):
    index_dir, checkpoint, retriever = tiny
    folder = tmp_path / "broken"
    shutil.copytree(retriever.folder, folder)
    (folder / "plaid" / "ivf.pid.pt").unlink()
    broken = ColBERTRetriever(folder, checkpoint, timeout=300)
    with pytest.raises(SireragError, match=r"ColBERT 'open' failed: .*ivf"):
        broken.search("anything", k=3)
    broken.close()


#: arguments of an 'open' request; the worker tests below never let it get that far
OPEN_ARGS = {"checkpoint": "unused", "collection": "unused.tsv", "root": "unused", "name": "plaid",
             "query_maxlen": None}


def test_a_worker_that_does_not_answer_in_time_is_stopped(tmp_path):
    import os

    worker = WorkerClient(cwd=tmp_path)
    worker.start()
    os.kill(worker.proc.pid, signal.SIGSTOP)  # frozen: it cannot answer, however fast the machine
    with pytest.raises(SireragError, match=r"did not finish 'open' within 0.5 s and was stopped"):
        worker.call("open", OPEN_ARGS, timeout=0.5)
    assert worker.proc is not None and worker.proc.returncode == -signal.SIGKILL  # killed and reaped
    assert not worker.alive


def test_a_worker_that_dies_mid_request_raises_at_once(tmp_path):
    import os

    worker = WorkerClient(cwd=tmp_path)
    worker.start()
    stdin = worker.proc.stdin

    class CrashAfterSend:
        """The worker's stdin; the worker is killed (a crash, from outside) once the request is sent."""

        def write(self, text: str) -> int:
            return stdin.write(text)

        def flush(self) -> None:
            stdin.flush()
            os.kill(worker.proc.pid, signal.SIGKILL)

    worker.proc.stdin = CrashAfterSend()
    # the timeout is far longer than the test may take: the error must come from the exit itself
    with pytest.raises(SireragError, match=r"worker exited with code -9 during 'open'"):
        worker.call("open", OPEN_ARGS, timeout=600)
    worker.proc.stdin = stdin


def test_collection_text_keeps_one_line_per_entry():
    assert collection_text("Title\nline one\tcol\r\nline two ") == "Title line one col line two"


def test_resolve_checkpoint_errors_name_the_problem(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no such folder"):
        resolve_checkpoint(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="config.json"):
        resolve_checkpoint(str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"huggingface-cli download sirerag-test/no-such-colbert .*in place of "
                                          r"the name \(\./no-such-colbert\)") as raised:
        resolve_checkpoint("sirerag-test/no-such-colbert")
    # used by `sirerag index --colbert` and `search --checkpoint`: it names no option one of them lacks
    assert "--checkpoint" not in str(raised.value)


def test_missing_colbert_ai_names_the_extra(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "colbert" else real(name, *a))
    index_dir = _make_index(tmp_path / "index", _passages(5))
    with pytest.raises(MissingExtraError, match=r"sirerag\[colbert\]"):
        load_retriever("colbert", load_index(index_dir), checkpoint="colbert-ir/colbertv2.0")
