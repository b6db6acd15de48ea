"""What every benchmark measures, measured one way: time, memory, percentiles, the machine, the report.

- :class:`Mark` and :class:`Timer`: wall seconds (``time.perf_counter``), CPU seconds of this process
  (``time.process_time``: every thread, user + system) and CPU seconds of its finished child processes
  (``os.times``: only children that were waited for).
- :func:`peak_rss_mib`: peak resident set size in MiB (2**20 bytes), of this process (``"self"``) or of
  the largest finished child process (``"children"``), from ``getrusage``. :func:`run_command` runs one
  child and reads that child's own peak from ``wait4``.
- :func:`percentiles`: p50, p95 and p99 by ``numpy.percentile(..., method="linear")`` (numpy's default,
  the one ``sirerag eval`` uses for its latencies), plus the count and the mean.
- :func:`machine_info`: CPU count and model, load average, Python, torch, numpy and sirerag versions,
  the git commit of the checkout.
- :class:`Report`: the one JSON document every benchmark writes, ``{"machine", "command", "results"}``
  (docs/benchmarks.md describes the fields).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Final, Iterable, Sequence

import numpy as np

SCHEMA = "sirerag-benchmark/1"
PERCENTILE_METHOD: Final = "linear"
QUANTILES = (50, 95, 99)
ROOT = Path(__file__).resolve().parents[1]
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux


@dataclass(frozen=True)
class Mark:
    """One reading of the clocks; subtract two with :meth:`since`."""

    wall: float
    cpu: float
    children_cpu: float

    @classmethod
    def now(cls) -> "Mark":
        times = os.times()
        return cls(time.perf_counter(), time.process_time(), times.children_user + times.children_system)

    def since(self, earlier: "Mark", ndigits: int | None = 3) -> dict[str, float]:
        """``wall_s``, ``cpu_s`` and ``children_cpu_s`` from ``earlier`` to this mark."""
        values = {"wall_s": self.wall - earlier.wall, "cpu_s": self.cpu - earlier.cpu,
                  "children_cpu_s": self.children_cpu - earlier.children_cpu}
        return {k: v if ndigits is None else round(v, ndigits) for k, v in values.items()}


class Timer:
    """Times a ``with`` block; ``wall_s``, ``cpu_s`` and ``children_cpu_s`` are set on exit (and read
    the running values inside the block)."""

    def __init__(self) -> None:
        self.start = Mark.now()
        self.end: Mark | None = None

    def __enter__(self) -> "Timer":
        self.start, self.end = Mark.now(), None
        return self

    def __exit__(self, *exc: object) -> None:
        self.end = Mark.now()

    def _span(self) -> dict[str, float]:
        return (self.end or Mark.now()).since(self.start, ndigits=None)

    @property
    def wall_s(self) -> float:
        return self._span()["wall_s"]

    @property
    def cpu_s(self) -> float:
        return self._span()["cpu_s"]

    @property
    def children_cpu_s(self) -> float:
        return self._span()["children_cpu_s"]

    def to_dict(self, ndigits: int = 3) -> dict[str, float]:
        return (self.end or Mark.now()).since(self.start, ndigits=ndigits)


def peak_rss_mib(who: str = "self") -> float:
    """Peak RSS in MiB of this process (``"self"``) or of the largest child process waited for so far
    (``"children"``; 0.0 before the first one)."""
    if who not in ("self", "children"):
        raise ValueError(f"peak_rss_mib: who={who!r}; expected 'self' or 'children'")
    usage = resource.getrusage(resource.RUSAGE_SELF if who == "self" else resource.RUSAGE_CHILDREN)
    return round(usage.ru_maxrss * _RSS_UNIT / 2**20, 1)


def run_command(command: Sequence[str], log: str | Path | None = None, **popen: Any) -> dict[str, Any]:
    """Run ``command`` to its end (output to ``log``, else inherited) and measure that child alone:
    ``returncode``, ``wall_s``, ``cpu_s`` (user + system of the child and its waited-for descendants)
    and ``peak_rss_mib`` (the largest of them), from ``os.wait4``."""
    start = time.perf_counter()
    handle = open(log, "w", encoding="utf-8") if log is not None else None
    try:
        proc = subprocess.Popen(list(command), stdout=handle, stderr=subprocess.STDOUT if handle else None, **popen)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if handle is not None:
            handle.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"command": [str(c) for c in command], "returncode": proc.returncode,
            "wall_s": round(time.perf_counter() - start, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_rss_mib": round(usage.ru_maxrss * _RSS_UNIT / 2**20, 1)}


def percentiles(values: Iterable[float], unit: str = "s", ndigits: int = 3) -> dict[str, float | int | None]:
    """``n``, ``mean`` and p50/p95/p99 of ``values`` (given in seconds) in ``unit`` (``"s"`` or ``"ms"``),
    keys suffixed with the unit: ``{"n": 20, "mean_ms": ..., "p50_ms": ..., "p95_ms": ..., "p99_ms": ...}``.
    Empty input gives ``None`` for every statistic."""
    scale = {"s": 1.0, "ms": 1000.0}.get(unit)
    if scale is None:
        raise ValueError(f"percentiles: unit={unit!r}; expected 's' or 'ms'")
    array = np.asarray(list(values), dtype=np.float64) * scale
    out: dict[str, float | int | None] = {"n": int(array.size)}
    out[f"mean_{unit}"] = round(float(array.mean()), ndigits) if array.size else None
    points = np.percentile(array, QUANTILES, method=PERCENTILE_METHOD) if array.size else [None] * len(QUANTILES)
    for q, value in zip(QUANTILES, points):
        out[f"p{q}_{unit}"] = None if value is None else round(float(value), ndigits)
    return out


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def machine_info() -> dict[str, Any]:
    """The machine and the software a figure was measured with; ``load_average`` is read now."""
    import sirerag

    return {"hostname": platform.node(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "cpu_model": _cpu_model(), "load_average": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "numpy": np.__version__, "torch": _version("torch"),
            "sirerag": sirerag.__version__, "git": _git_commit()}


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--json PATH`` option every benchmark has."""
    parser.add_argument("--json", dest="json_out", metavar="PATH", help="also write the report here as JSON")


class Report:
    """The report of one benchmark run. Created at the start (machine info and load average then),
    filled in ``results``, and written with :meth:`write` (load average again, the run's own time and
    peak RSS). The JSON is ``{"machine": {...}, "command": {...}, "results": {...}}``."""

    def __init__(self, benchmark: str, argv: Sequence[str] | None = None) -> None:
        self.benchmark = benchmark
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.started = datetime.now(timezone.utc)
        self.timer = Timer().__enter__()
        self.machine = machine_info()
        self.results: dict[str, Any] = {}

    def finish(self) -> dict[str, Any]:
        """The report as a dict, with the end-of-run readings taken now."""
        machine = dict(self.machine)
        machine["load_average_start"] = machine.pop("load_average")
        machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        command = {"benchmark": self.benchmark, "argv": self.argv, "cwd": os.getcwd(),
                   "started": self.started.isoformat(timespec="seconds"),
                   "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   **self.timer.to_dict(ndigits=2), "peak_rss_mib": peak_rss_mib("self"),
                   "children_peak_rss_mib": peak_rss_mib("children")}
        return {"schema": SCHEMA, "machine": machine, "command": command, "results": self.results}

    def write(self, path: str | Path | None = None, *, show: bool = True) -> dict[str, Any]:
        """Finish the report; print it (``show``) and write it to ``path`` when given."""
        document = self.finish()
        text = json.dumps(document, indent=2, default=_jsonable)
        if show:
            print(text, flush=True)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return document


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (Path, set, tuple)):
        return str(value) if isinstance(value, Path) else list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
