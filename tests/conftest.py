"""Test set-up shared by every test module.

The fine-tuning tools live in ``finetune/`` and install as the package ``sirerag_finetune``
(``[tool.setuptools.package-dir]``). Tests run this checkout's code (``PYTHONPATH=$PWD``),
so ``sirerag_finetune`` is loaded from this checkout's ``finetune/`` folder even when an
install of another checkout (or none) provides it.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _use_this_checkouts_finetune() -> None:
    folder = ROOT / "finetune"
    found = importlib.util.find_spec("sirerag_finetune")
    if found is not None and found.origin and Path(found.origin).resolve().parent == folder:
        return
    spec = importlib.util.spec_from_file_location("sirerag_finetune", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sirerag_finetune"] = module
    spec.loader.exec_module(module)


_use_this_checkouts_finetune()


@pytest.fixture(autouse=True)
def _server_is_up(request):
    """Tests marked ``server`` find the llama.cpp server answering: it is restarted once if it is gone."""
    if request.node.get_closest_marker("server") is not None:
        from _llm_server import ensure_server

        ensure_server()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing ``server`` test shows the tail of the server's log under its traceback."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and item.get_closest_marker("server") is not None:
        from _llm_server import log_tail

        report.sections.append(("llama.cpp server log (tail)", log_tail(os.environ.get("SIRERAG_TEST_SERVER_URL"))))


@pytest.fixture(scope="session")
def data_leaves(tmp_path_factory):
    """``data/`` indexed as passages only (MiniLM, no trees), built once per session for every module that
    reads it; returns (index, embedding cache). The cache lies beside the index, so a later build of the same
    corpus (``--cache CACHE``) embeds no leaf again. Tests must not write into the index."""
    from sirerag.cli.main import main

    root = tmp_path_factory.mktemp("data-leaves")
    index, cache = root / "leaves", root / "cache"
    assert main(["build", str(ROOT / "data" / "corpus.jsonl"), "--out", str(index), "--trees", "none",
                 "--chunking", "passage", "--cache", str(cache), "--quiet"]) == 0
    return index, cache


def pytest_collection_modifyitems(config, items):
    """A test that needs the llama.cpp server is slow too, so the quick tier (``-m "not slow"``) never starts one.

    Run in worker processes (pytest-xdist, ``-n 2 --dist loadgroup``, as ``scripts/test.sh`` does), a module's
    tests stay together in one worker (its module-scoped builds are made once), and so do all the tests of the
    one llama.cpp server (it is restarted when gone), and all the Ray tests (one Ray instance at a time;
    a Ray test that also uses the server stays with the Ray tests)."""
    parallel = config.pluginmanager.hasplugin("xdist")
    for item in items:
        server = item.get_closest_marker("server") is not None
        if server and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if parallel:
            module = item.module.__name__ if item.module is not None else item.nodeid.split("::")[0]
            group = "ray" if "ray" in module.rsplit(".", 1)[-1] else "llama-server" if server else module
            item.add_marker(pytest.mark.xdist_group(group))
