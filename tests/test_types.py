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


def _any_in_signature(func) -> list[str]:
    """The parameters (all but ``**kwargs``) and the return of ``func`` whose annotation names ``Any``."""
    import inspect

    signature = inspect.signature(func)
    found = [p.name for p in signature.parameters.values()
             if p.kind is not p.VAR_KEYWORD and "Any" in str(p.annotation)]
    return found + (["return"] if "Any" in str(signature.return_annotation) else [])


def test_the_front_door_names_its_types():
    """``Index`` and the reader name what they take and return: ``Any`` is left only in ``**options`` and
    ``**settings`` (each retriever's own options, a build section as a mapping), where api.py says why."""
    from sirerag.answers import answer_question, open_reader
    from sirerag.api import Index

    found = {}
    for name, member in vars(Index).items():
        func = member.__func__ if isinstance(member, classmethod) else \
            member.fget if isinstance(member, property) else member
        if not name.startswith("_") and callable(func):
            found[name] = _any_in_signature(func)
    found.update(answer_question=_any_in_signature(answer_question), open_reader=_any_in_signature(open_reader))
    assert {name: params for name, params in found.items() if params} == {}
    assert {"build", "search", "retriever", "add", "remove", "export", "ask"} <= set(found)
