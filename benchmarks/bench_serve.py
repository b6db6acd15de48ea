"""Load test of ``sirerag serve``: N concurrent clients on 127.0.0.1 for a bounded time, with an ``add`` swapping
the index mid-run.

The corpus is split: the first rows are built into an index (or ``--index`` is used as it is), the last
``--add-share`` are added with ``sirerag add`` (a separate process, as a user would) ``--swap-at`` seconds into the
run; the load goes on until ``--duration`` is over and at least ``--after`` seconds past the add's end. The
server is ``sirerag serve`` in its own process on a port the system picks; each client posts one query at
a time to ``POST /search`` (the corpus' questions, when ``--questions`` is given, and the titles of the added
documents, so answers after the swap reach the new entries). Reported: requests per second, latency p50/p95/p99
(ms), errors (a status other than 200, or no answer) and mixed answers: every answer names the commit it was served
from, and each of its hits must be an entry of that commit with the same text (the pools of the commits before and
after the add are read from the index when the run is over).

    python -m benchmarks.bench_serve data/corpus.jsonl --questions data/questions.jsonl --work /tmp/serve \\
        --clients 8 --duration 40 --swap-at 10 --json serve.json -- --trees none
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from benchmarks.harness import Mark, Report, add_json_argument, percentiles, run_command

ROOT = Path(__file__).resolve().parents[1]


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def split_corpus(corpus: Path, work: Path, add_share: float) -> tuple[Path, Path, list[str]]:
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    cut = len(rows) - max(1, int(len(rows) * add_share))
    base, added = work / "base.jsonl", work / "added.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in rows[:cut]), encoding="utf-8")
    added.write_text("".join(json.dumps(r) + "\n" for r in rows[cut:]), encoding="utf-8")
    return base, added, [str(r.get("title") or r["text"][:80]) for r in rows[cut:]]


def entries_of(index_dir: Path) -> tuple[str, dict[str, str]]:
    """The commit of the folder and ``{entry id: text digest}`` of its pool."""
    import sirerag

    with sirerag.Index.load(index_dir) as index:
        return index.loaded.commit, {e.id: digest(e.text) for e in index.pool.entries}


def start_server(index_dir: Path, workers: int, log: Path) -> tuple[subprocess.Popen, str]:
    """``sirerag serve`` on a port the system picks; its stderr is copied to ``log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "sirerag", "serve", f"bench={index_dir}", "--port", "0",
                             "--workers", str(workers)], stderr=subprocess.PIPE, text=True, env=env)
    stderr = proc.stderr
    assert stderr is not None  # stderr=PIPE
    handle = open(log, "w", encoding="utf-8")
    for line in stderr:
        handle.write(line)
        found = re.search(r"serving bench on (http://127\.0\.0\.1:\d+)", line)
        if found:
            break
    else:
        handle.close()
        raise SystemExit(f"the server did not start; see {log}")

    def drain() -> None:  # keep reading, so the server never blocks on a full pipe
        for rest in stderr:
            handle.write(rest)
        handle.close()

    threading.Thread(target=drain, daemon=True).start()
    return proc, found.group(1)



def _now() -> float:
    """The harness's wall clock (seconds)."""
    return Mark.now().wall


async def load(url: str, queries: list[str], args: argparse.Namespace, add_cmd: list[str]) -> dict[str, Any]:
    import httpx

    answers: list[tuple[float, float, int, str | None, list[tuple[str, str]]]] = []  # start, seconds, status...
    errors: list[str] = []
    add_info: dict[str, Any] = {}
    start = _now()
    stop = [start + args.duration, False]  # the end of the load; True once the add has finished

    def running() -> bool:  # the duration, and at least --after seconds past the add's end
        return _now() < stop[0] or not stop[1]

    async def client(n: int, http: httpx.AsyncClient) -> None:
        i = n
        while running():
            query = queries[i % len(queries)]
            i += args.clients
            t0 = _now()
            try:
                response = await http.post("/search", json={"query": query, "k": args.k, **args.body})
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            seconds = _now() - t0
            if response.status_code != 200:
                errors.append(f"{response.status_code}: {response.text[:200]}")
                answers.append((t0 - start, seconds, response.status_code, None, []))
                continue
            body = response.json()
            hits = [(h["id"], digest(h["text"])) for r in body["results"] for h in r["hits"]]
            answers.append((t0 - start, seconds, 200, body["commit"], hits))

    async def swap() -> None:
        await asyncio.sleep(args.swap_at)
        t0 = _now()
        proc = await asyncio.create_subprocess_exec(*add_cmd, stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        add_info.update(started_s=round(t0 - start, 3), finished_s=round(_now() - start, 3),
                        returncode=proc.returncode, stderr_tail=err.decode()[-300:])
        stop[:] = [max(stop[0], _now() + args.after), True]

    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        await asyncio.gather(swap(), *(client(n, http) for n in range(args.clients)))
    return {"answers": answers, "errors": errors, "add": add_info, "wall_s": _now() - start}


def verify(answers: list, pools: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Mixed answers: an unknown commit, or a hit that is not that commit's entry with that text."""
    mixed, by_commit = 0, {c: 0 for c in pools}
    for _, _, status, commit, hits in answers:
        if status != 200:
            continue
        pool = pools.get(commit)
        if pool is None or any(pool.get(entry) != text for entry, text in hits):
            mixed += 1
        else:
            by_commit[commit] += 1
    return {"mixed_answers": mixed, "answers_by_commit": by_commit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path, help="corpus.jsonl to build from and add from")
    ap.add_argument("--work", type=Path, required=True, help="folder for the index, the split corpus and logs")
    ap.add_argument("--index", type=Path, help="serve this index (built from the corpus' first rows) as it is")
    ap.add_argument("--questions", type=Path, help="questions.jsonl whose questions the clients ask")
    ap.add_argument("--add-share", type=float, default=0.2, help="share of the corpus added mid-run (default 0.2)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--duration", type=float, default=40.0, help="seconds of load (default 40)")
    ap.add_argument("--swap-at", type=float, default=10.0, help="seconds into the run the add starts (default 10)")
    ap.add_argument("--after", type=float, default=10.0,
                    help="seconds the load goes on after the add has finished (default 10)")
    ap.add_argument("--workers", type=int, default=0, help="the server's search threads (default: one per core)")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--retriever", help="sent with every query (default: the index's)")
    add_json_argument(ap)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    build_args = argv[cut + 1:]  # after --: arguments of sirerag build
    args.body = {"retriever": args.retriever} if args.retriever else {}
    report = Report("bench_serve")
    args.work.mkdir(parents=True, exist_ok=True)
    base, added, titles = split_corpus(args.corpus, args.work, args.add_share)
    index_dir = args.index or args.work / "index"
    sirerag = [sys.executable, "-m", "sirerag"]
    if args.index is None:
        report.results["build"] = run_command([*sirerag, "build", str(base), "--out", str(index_dir), *build_args],
                                              log=args.work / "build.log", env={**os.environ, "PYTHONPATH": str(ROOT)})
    before_commit, before = entries_of(index_dir)
    queries = titles
    if args.questions:
        from sirerag.evaluation.retrieval import load_questions

        queries = [q.question for q in load_questions(args.questions)] + titles
    proc, url = start_server(index_dir, args.workers, args.work / "server.log")
    try:
        import httpx

        with httpx.Client(base_url=url, timeout=300) as http:  # the retriever's first load, outside the figures
            warm = http.post("/search", json={"query": queries[0], "k": args.k, **args.body})
            warm.raise_for_status()
        add_cmd = [*sirerag, "add", str(index_dir), str(added)]
        run = asyncio.run(load(url, queries, args, add_cmd))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    after_commit, after = entries_of(index_dir)
    answers = run["answers"]
    ok = [a for a in answers if a[2] == 200]
    new_ids = set(after) - set(before)
    first_new = min((a[0] for a in ok if a[3] == after_commit), default=None)
    report.results.update({
        "corpus": str(args.corpus), "index": str(index_dir), "clients": args.clients, "k": args.k,
        "retriever": args.retriever or "default", "queries": len(queries), "duration_s": args.duration, "after_s": args.after,
        "wall_s": round(run["wall_s"], 3), "requests": len(ok) + len(run["errors"]),
        "answers_ok": len(ok), "errors": len(run["errors"]), "error_samples": run["errors"][:5],
        "throughput_rps": round(len(ok) / run["wall_s"], 2), "latency": percentiles([a[1] for a in ok], unit="ms"),
        **verify(answers, {before_commit: before, after_commit: after}),
        "commits": {"before": before_commit, "after": after_commit}, "entries": {"before": len(before),
                                                                                 "after": len(after)},
        "add": run["add"], "first_answer_from_new_commit_s": first_new,
        "answers_with_added_entries": sum(1 for a in ok if any(e in new_ids for e, _ in a[4])),
    })
    report.write(args.json_out)


if __name__ == "__main__":
    main()
