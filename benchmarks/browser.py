"""Headless Chromium for the report tests and ``benchmarks/bench_inspect.py``: ``--dump-dom``/``--screenshot``
runs and a tiny DevTools-protocol client over ``--remote-debugging-pipe`` (no websocket library needed)."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_headless(browser: str, url: str, *extra: str, timeout: float = 120) -> str:
    """Run Chromium once (``--dump-dom`` or ``--screenshot=...`` in ``extra``); returns its stdout."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000",
                               *extra, url], capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


def _high(fds: tuple[int, int]) -> tuple[int, int]:
    """The same pipe ends moved above fd 20, so the shell's ``3<&N 4>&M`` cannot clash with them."""
    out = []
    for fd in fds:
        out.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 20))
        os.close(fd)
    return out[0], out[1]


class DevTools:
    """One page driven over the DevTools protocol; use as a context manager."""

    def __init__(self, browser: str) -> None:
        self.profile = tempfile.TemporaryDirectory()
        to_child_r, self._to_child_w = _high(os.pipe())
        self._from_child_r, from_child_w = _high(os.pipe())
        # the browser reads commands from fd 3 and writes replies to fd 4; sh moves the pipe ends there
        shell = f'exec "$@" 3<&{to_child_r} 4>&{from_child_w} {to_child_r}<&- {from_child_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", shell, "bash", browser, *FLAGS,
                                      f"--user-data-dir={self.profile.name}", "--remote-debugging-pipe",
                                      "--window-size=1280,900", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     pass_fds=(to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self._reader = os.fdopen(self._from_child_r, "rb", buffering=0)
        self._buf = b""
        self._next = 0
        self.session: str | None = None
        self.dialogs: list[str] = []

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("method") == "Page.javascriptDialogOpening":
                self.dialogs.append(reply["params"].get("message", ""))
                self.send("Page.handleJavaScriptDialog", {"accept": True})
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            chunk = self._reader.read(1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str, *, scripts: bool = True) -> None:
        """Open ``url`` in a new page; waits for the report script to finish (or for the load event
        when ``scripts`` is False, which turns JavaScript off for the page)."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        if not scripts:
            self.send("Emulation.setScriptExecutionDisabled", {"value": True})
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && document.body !== null" if not scripts
                      else "document.body && document.body.dataset.ready === '1'")

    def html(self) -> str:
        """The page's current DOM as HTML."""
        root = self.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        return self.send("DOM.getOuterHTML", {"nodeId": root})["outerHTML"]

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 30.0) -> None:
        """Poll ``condition`` (a JS expression) until it is truthy (works with page scripts off too)."""
        deadline = time.monotonic() + timeout
        while not self.eval(f"!!({condition})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"page never satisfied: {condition}")
            time.sleep(0.05)

    def __enter__(self) -> "DevTools":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.close()
        os.close(self._to_child_w)
        self.profile.cleanup()
