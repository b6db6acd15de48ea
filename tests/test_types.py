"""The code's types are checked: mypy with the settings of ``pyproject.toml``'s ``[tool.mypy]`` (its
``files``: ``sirerag/``, ``finetune/`` and ``benchmarks/``) reports no error (its cache, ``.mypy_cache/``,
makes a rerun take seconds)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_code():
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


def _mentions_any(annotation: ast.expr | None) -> bool:
    """``annotation`` names ``Any`` other than as the values of a str-keyed mapping (``dict[str, Any]``,
    ``Mapping[str, Any]``: a JSON object or a set of keywords, whose values are arbitrary by nature)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        return _mentions_any(ast.parse(annotation.value, mode="eval").body)
    text = ast.unparse(annotation)
    for mapping in ("dict", "Mapping", "MutableMapping"):
        text = text.replace(f"{mapping}[str, Any]", "JSONObject")
    return re.search(r"\bAny\b", text) is not None


def _public_functions(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions and methods of a module a user may call: no leading underscore (``__init__`` and
    ``__call__`` included), in a class without one; not the functions nested in a function."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") or node.name in ("__init__", "__call__"):
                yield node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _public_functions(node.body)


def _unexplained_any(path: Path) -> list[str]:
    """``file:line name(param)`` (or ``name -> return``) for each ``Any`` in a public signature of ``path``
    whose line and def line carry no ``# Any: <why>`` comment."""
    lines = path.read_text(encoding="utf-8").splitlines()
    explained = {n for n, line in enumerate(lines, start=1) if re.search(r"#.*\bAny: \S", line)}
    found = []
    for func in _public_functions(ast.parse("\n".join(lines)).body):
        args = func.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, [args.vararg, args.kwarg])]
        marked = [(p.annotation, f"{func.name}({p.arg})") for p in params]
        for annotation, what in [*marked, (func.returns, f"{func.name} -> return")]:
            if _mentions_any(annotation) and not {func.lineno, annotation.lineno,
                                                  annotation.end_lineno} & explained:
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}:{annotation.lineno} {what}")
    return found


def test_any_in_a_public_signature_says_why():
    """No public function of a public module takes or returns ``Any`` (except as a str-keyed mapping's
    values) unless its line, or the def line, says why in a ``# Any: <why>`` comment."""
    modules = [path for path in sorted((ROOT / "sirerag").rglob("*.py"))
               if not any(part.startswith("_") and part not in ("__init__.py", "__main__.py")
                          for part in path.relative_to(ROOT).parts)]
    assert len(modules) > 100
    found = [line for path in modules for line in _unexplained_any(path)]
    assert found == [], f"{len(found)} unexplained Any:\n" + "\n".join(found)


def test_the_any_check_catches_an_unexplained_any(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("from typing import Any, Mapping\n\n\n"
                      "def load(spec: Any, *, options: Mapping[str, Any] | None = None) -> Any | None: ...\n\n\n"
                      "def parse(text: str) -> list[Any]:  # Any: a parsed JSON value\n    ...\n\n\n"
                      "def _private(value: Any) -> Any: ...\n\n\n"
                      "class Reader:\n"
                      "    def __init__(self, llm: 'Any', **settings: Any) -> None: ...\n\n"
                      "    def read(self, *, into: dict[str, Any]) -> dict[str, Any]: ...\n", encoding="utf-8")
    assert _unexplained_any(module) == [f"{module}:4 load(spec)", f"{module}:4 load -> return",
                                        f"{module}:15 __init__(llm)", f"{module}:15 __init__(settings)"]
