"""Parent side of the ColBERT worker: start it, send requests, enforce timeouts.

Every request waits at most ``timeout`` seconds. A worker that exits, crashes or
does not answer in time is killed (with its process group) and turned into a
:class:`~sirerag.core.errors.SireragError` carrying the tail of its stderr, so the
caller never hangs.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

from sirerag.core.errors import SireragError

logger = logging.getLogger(__name__)
worker_logger = logging.getLogger("sirerag.retrievers.colbert.worker")

MODULE = "sirerag.retrievers._colbert_worker"
_TAIL_LINES = 40
#: where colbert-ai's compiled C++ extensions are cached unless TORCH_EXTENSIONS_DIR is set
EXTENSIONS_DIR = Path("~/.cache/sirerag/torch_extensions").expanduser()


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment, offline for the Hugging Face libraries (checkpoints are
    resolved to local folders before the worker starts), with compiled extensions cached in
    ``TORCH_EXTENSIONS_DIR`` (default :data:`EXTENSIONS_DIR`)."""
    env = dict(os.environ)
    env.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


class WorkerClient:
    """One colbert-ai worker process.

    Args:
        cwd: working directory of the worker (colbert-ai may write stray files there).
        env: extra environment variables for the worker.
    """

    def __init__(self, cwd: str | Path, env: Mapping[str, str] | None = None) -> None:
        self.cwd = Path(cwd)
        self.env = worker_env(env)
        self.proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._stderr_reader: threading.Thread | None = None

    def start(self) -> None:
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE], cwd=self.cwd, env=self.env, text=True, encoding="utf-8",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so a kill reaches anything it spawned
        )
        threading.Thread(target=self._read_replies, args=(self.proc.stdout,), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(self.proc.stderr,), daemon=True)
        self._stderr_reader.start()
        logger.debug("started ColBERT worker pid %d", self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _read_replies(self, stream: Any) -> None:
        for line in stream:
            self._replies.put(line)
        self._replies.put(None)

    def _read_stderr(self, stream: Any) -> None:
        for line in stream:
            line = line.rstrip()
            if line:
                self._stderr.append(line)
                worker_logger.debug("%s", line)

    def stderr_tail(self) -> str:
        lines = list(self._stderr)
        return "\n".join(f"    {line}" for line in lines) if lines else "    (nothing on stderr)"

    def call(self, op: str, args: Mapping[str, Any], timeout: float) -> Any:
        """Send one request and return its result.

        Raises:
            SireragError: the worker failed, exited, or did not answer within ``timeout`` seconds.
        """
        if not self.alive:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None  # set by start()
        try:
            self.proc.stdin.write(json.dumps({"op": op, "args": dict(args)}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone; the reply queue says how
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise SireragError(
                f"the ColBERT worker did not finish '{op}' within {timeout:g} s and was stopped; "
                f"pass a larger timeout if the pool is large. Last lines of its stderr:\n{self.stderr_tail()}"
            ) from None
        if line is None:
            code = self.kill()
            raise SireragError(
                f"the ColBERT worker exited with code {code} during '{op}'. "
                f"Last lines of its stderr:\n{self.stderr_tail()}"
            )
        reply = json.loads(line)
        if not reply.get("ok"):
            trace = reply.get("traceback", "").strip().splitlines()[-12:]
            raise SireragError(
                f"ColBERT '{op}' failed: {reply.get('error')}\n" + "\n".join(f"    {t}" for t in trace)
            )
        return reply["result"]

    def kill(self) -> int | None:
        """Kill the worker and its process group; returns the worker's exit code."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:  # not reaped yet, so its group id is still ours
            try:  # the group may outlive the worker (a child it spawned)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        code = self.proc.wait()
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=5)  # collect the last lines (a traceback)
        return code

    def close(self, timeout: float = 10.0) -> None:
        """Ask the worker to exit (end of input); kill it if it does not within ``timeout``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.proc = None
