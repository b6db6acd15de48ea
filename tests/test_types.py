"""The package's types are checked: mypy over ``sirerag/`` with the settings of ``pyproject.toml``'s
``[tool.mypy]`` reports no error (its cache, ``.mypy_cache/``, makes a rerun take seconds)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_package():
    run = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, f"mypy reported errors:\n{run.stdout}{run.stderr}"
    assert "Success: no issues found" in run.stdout
