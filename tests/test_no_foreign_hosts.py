"""A URL typo in a spec never sends a request to a host the user did not name.

``openai:x@localhost:18451/v1`` (no ``http://``) once made the whole tail a model name of OpenAI's, so a build
sent the corpus and ``ask`` the question and its passages to api.openai.com. Each command runs here in a
subprocess with a fake key, no ``OPENAI_BASE_URL`` and a socket guard (a ``sitecustomize`` module) that refuses
and records every connection, and every name look-up, to a host other than 127.0.0.1: the command must stop
with one line naming the option, and the guard's record must stay empty.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _tiny_index import build_tiny_index, write_corpus

ROOT = Path(__file__).resolve().parents[1]

GUARD = textwrap.dedent('''
    """Refuse and record every connection or look-up of a host other than 127.0.0.1."""
    import os
    import socket

    _LOG = os.environ["SIRERAG_TEST_SOCKET_LOG"]


    def _refuse(host):
        host = host.decode() if isinstance(host, bytes) else str(host)
        if host == "127.0.0.1":
            return
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(host + "\\n")
        raise OSError(f"socket guard: no connection to {host}")


    _getaddrinfo = socket.getaddrinfo
    _connect = socket.socket.connect
    _connect_ex = socket.socket.connect_ex
    _create_connection = socket.create_connection


    def getaddrinfo(host, *args, **kwargs):
        if host is not None:
            _refuse(host)
        return _getaddrinfo(host, *args, **kwargs)


    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _refuse(address[0])
        return _connect(self, address)


    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _refuse(address[0])
        return _connect_ex(self, address)


    def create_connection(address, *args, **kwargs):
        _refuse(address[0])
        return _create_connection(address, *args, **kwargs)


    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.create_connection = create_connection
''')

#: runs ``sirerag`` once per command line of the JSON list in argv[1] (one interpreter for all: fast), and prints
#: each one's exit status and what it wrote to stderr as JSON
DRIVER = textwrap.dedent('''
    import contextlib, io, json, sys
    from sirerag.cli.main import main
    out = []
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(argv)
        out.append([code, err.getvalue()])
    print()
    print(json.dumps(out))  # the last line: after what the commands printed
''')
TYPOS = ["openai:x@localhost:18451/v1", "openai:x@127.0.0.1:18451", "openai:x@ftp://127.0.0.1/v1",
         "openai:localhost:18451/v1"]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return build_tiny_index(tmp_path_factory.mktemp("ask"))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """``run(*args)``: ``python ARGS`` under the guard; returns the process and the hosts it tried."""
    root = tmp_path_factory.mktemp("guard")
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(OPENAI_API_KEY="sk-fake-0123456789", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(root / "site"), str(ROOT), env.get("PYTHONPATH", "")]))
    count = iter(range(1000))

    def run(*args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
        log = root / f"attempts-{next(count)}.txt"
        proc = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True,
                              timeout=300, env={**env, "SIRERAG_TEST_SOCKET_LOG": str(log)})
        return proc, log.read_text(encoding="utf-8").split() if log.exists() else []

    return run


def run_sirerag(guarded, argvs: list[list[str]]) -> tuple[list[tuple[int, list[str]]], list[str]]:
    """Each command line's exit status and stderr lines, and every host the commands tried."""
    proc, hosts = guarded("-c", DRIVER, json.dumps(argvs))
    assert proc.returncode == 0, proc.stderr
    return [(code, err.strip().splitlines()) for code, err in json.loads(proc.stdout.splitlines()[-1])], hosts


def one_line(lines: list[str]) -> str:
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


def test_the_guard_records_and_refuses_a_request_to_another_host(guarded):
    proc, hosts = guarded("-c", "import sirerag")
    assert proc.returncode == 0 and hosts == []
    proc, hosts = guarded("-c", "import urllib.request as u; u.urlopen('https://api.openai.com/v1/models', timeout=5)")
    assert proc.returncode == 1 and "socket guard: no connection to api.openai.com" in proc.stderr
    assert hosts == ["api.openai.com"]


def test_build_with_a_typo_in_a_url_calls_no_other_host(guarded, tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    trees = {"--llm": "similarity", "--extractor-llm": "relatedness", "--embedder": "none"}
    cases = [(option, spec) for option in trees for spec in TYPOS]
    argvs = [["build", str(corpus), "--out", str(tmp_path / "idx"), "--chunking", "passage", "--trees",
              trees[option], option, spec] for option, spec in cases]
    results, hosts = run_sirerag(guarded, argvs)
    assert hosts == []
    for (option, spec), (code, lines) in zip(cases, results):
        assert code == 1 and one_line(lines).startswith(f"sirerag build: error: {option} openai:"), (spec, lines)
    assert not (tmp_path / "idx").exists()


def test_ask_with_a_typo_in_a_url_calls_no_other_host(guarded, index_dir):
    results, hosts = run_sirerag(guarded, [["ask", str(index_dir), "Who designed the Harwick Bridge?", "--llm", spec]
                                           for spec in TYPOS])
    assert hosts == []
    for spec, (code, lines) in zip(TYPOS, results):
        assert code == 1 and one_line(lines).startswith("sirerag ask: error: --llm openai:"), (spec, lines)


def test_a_folder_build_and_search_read_no_file_outside_the_folder_and_call_no_other_host(guarded, tmp_path):
    """The second hole of the same pass: symbolic links in a folder corpus led to any file on the machine."""
    secret = tmp_path / "outside" / "secret.cfg"
    secret.parent.mkdir()
    secret.write_text("api_key = sk-live-SECRETVALUE0123\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\nThe Harwick Bridge was designed by Margaret Lowe.\n", encoding="utf-8")
    (docs / "notes.txt").symlink_to(secret)
    (docs / ".env").write_text("TOKEN=sk-live-HIDDENVALUE0123\n", encoding="utf-8")
    out = tmp_path / "idx"
    results, hosts = run_sirerag(guarded, [["build", str(docs), "--out", str(out), "--chunking", "passage",
                                            "--trees", "none"],
                                           ["search", str(out), "api_key", "--json"]])
    assert hosts == []
    (build_code, build_err), (search_code, _) = results
    assert build_code == 0 and search_code == 0
    assert any("skipped 1 symbolic link(s) whose real path lies outside the folder: notes.txt" in line
               for line in build_err), build_err
    held = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file() and "cache" not in p.parts)
    assert b"SECRETVALUE" not in held and b"HIDDENVALUE" not in held
