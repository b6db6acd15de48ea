"""MiniLM on ONNX Runtime (extra ``onnx``): exported offline, close to the torch model, cached apart."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("optimum.onnxruntime")

from sirerag.embedding import load_embedder  # noqa: E402
from sirerag.embedding.st_onnx import ONNX_SPECS, load_minilm_onnx  # noqa: E402

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parents[1] / "data"


def _no_network(*args, **kwargs):
    raise OSError("network access attempted during a test that must run offline")


@pytest.fixture(scope="module")
def texts():
    with open(DATA / "corpus.jsonl", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(64), fh)]
    return [r["title"] + "\n" + r["text"] for r in rows]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx")


@pytest.mark.parametrize("spec", sorted(ONNX_SPECS))
def test_onnx_minilm_matches_the_torch_model(spec, texts, export_dir, monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    onnx = load_minilm_onnx(spec, model_dir=export_dir, show_progress=False)
    torch_model = load_embedder("minilm", show_progress=False)
    assert onnx.spec == ONNX_SPECS[spec][1] != torch_model.spec  # cache keys and manifests tell them apart
    assert (export_dir / ONNX_SPECS[spec][0]).is_file()
    cosines = (onnx.encode_documents(texts) * torch_model.encode_documents(texts)).sum(axis=1)
    assert cosines.min() >= 0.99
    queries = onnx.encode_queries(["Where was Clara Peeters born?"])
    assert queries.shape == (1, 384) and np.isclose(np.linalg.norm(queries), 1.0, atol=1e-5)
