"""A real small build with LLM summaries through the llama.cpp server: killed midway and
resumed, rebuilt from the cache, compared with the dry run, and checked for leaked secrets."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
import _kills as kills
from _llm_server import server_url

from sirerag.cli.main import main
from sirerag.core.config import load_config
from sirerag.llm.cache import CallCache, resolve_db
from sirerag.pipeline.dryrun import dry_run

pytestmark = [pytest.mark.server, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"
SECRET = "sk-sirerag-build-test-6c1e0f9a2d7b4835"
DRIVER = kills.driver(r"""
from sirerag.llm.cache import CachedLLM
count = CachedLLM._count
CachedLLM._count = lambda self, **k: (count(self, **k), k.get("misses") and halt("mid:llm"))[0]
""")


def entries(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    url = server_url()
    root = tmp_path_factory.mktemp("llm_build")
    rows = sorted((json.loads(line) for line in DATA.open()), key=lambda r: len(r["text"]))[:16]
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = root / "build.toml"
    config.write_text('[tree]\nsummary_max_tokens = 24\n[llm]\nmax_concurrency = 1\n')
    out = root / "index"
    args = ["build", str(corpus), "--out", str(out), "--trees", "similarity", "--chunking", "passage",
            "--llm", f"openai:smollm2@{url}", "--config", str(config), "--quiet"]
    db = out / "cache" / "llm" / "calls.sqlite"

    os.environ["OPENAI_API_KEY"] = SECRET
    try:
        # 1. a build killed (SIGKILL) right after its first summary is cached and counted: the build halts there
        #    (tests/_kills.py) and is killed, so no race with its end
        proc = kills.start(DRIVER, "mid:llm", args)
        kills.stop_at(proc, "mid:llm")
        stderr = kills.stderr(proc)
        kills.kill(proc)
        killed_after = entries(db)
        # 2. the same build resumed in-process, then 3. rebuilt
        assert main(args) == 0
        resumed = CallCache(db).stats()["last_run"]
        assert main(args) == 0
        rebuilt = CallCache(db).stats()
    finally:
        del os.environ["OPENAI_API_KEY"]
    return {"root": root, "out": out, "corpus": corpus, "config": config, "proc": proc, "stderr": stderr,
            "killed_after": killed_after, "resumed": resumed, "rebuilt": rebuilt, "url": url}


def test_killed_build_resumes_paying_only_for_what_was_missing(built):
    assert built["proc"].returncode == -signal.SIGKILL
    total = built["rebuilt"]["entries"]
    killed_after, resumed = built["killed_after"], built["resumed"]
    assert 1 <= killed_after < total
    assert resumed["hits"] == killed_after  # everything answered before the kill was reused ...
    assert resumed["misses"] == total - killed_after  # ... and only the rest was asked


def test_rebuild_makes_no_call(built):
    last = built["rebuilt"]["last_run"]
    assert last["misses"] == 0 and last["hits"] == built["rebuilt"]["entries"]
    manifest = json.loads((built["out"] / "manifest.json").read_text())
    assert manifest["summarizer"] == "llm:openai:smollm2" and manifest["llm"] == "openai:smollm2"


def test_dry_run_counts_match_the_real_build(built, capsys):
    out = built["out"]
    config = load_config(built["config"]).with_overrides(
        trees=("similarity",), chunking={"mode": "passage"}, llm={"spec": f"openai:smollm2@{built['url']}"})
    report = dry_run(built["corpus"], config, cache_dir=out / "cache", show_progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    levels = {int(k.rsplit("level", 1)[1]): n for k, n in manifest["counts"]["pool"]["by_tree_kind_level"].items()
              if k.startswith("similarity/summary/")}
    planned = {int(s.stage.rsplit(" ", 1)[1]): s for s in report.stages}
    assert {lvl: s.calls for lvl, s in planned.items()} == levels  # calls per level, as built
    assert report.total().calls == built["rebuilt"]["entries"]  # every call the build made, no more
    # level 1 is exact: every planned request is byte-identical to one the build sent
    assert planned[1].cached == planned[1].calls
    assert report.total().output_tokens_max == report.total().calls * 24

    assert main(["build", str(built["corpus"]), "--trees", "similarity", "--chunking", "passage", "--llm",
                 f"openai:smollm2@{built['url']}", "--config", str(built["config"]), "--cache",
                 str(out / "cache"), "--dry-run", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "no model called" in printed and f"{report.total().calls}" in printed
    assert CallCache(resolve_db(out)).stats()["all_runs"]["runs"] == 3  # the dry runs started no run


def test_no_secret_in_any_file_written(built):
    files = [p for p in built["root"].rglob("*") if p.is_file()]
    assert any(p.name == "calls.sqlite" for p in files) and any(p.name == "manifest.json" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in built["stderr"]
