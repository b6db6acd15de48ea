"""The core never imports the fine-tuning package; ``sirerag`` finds plugin commands
through the ``sirerag.commands`` entry point group."""
from __future__ import annotations

import ast
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FINETUNE_NAMES = ("finetune", "sirerag_finetune")


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def test_no_module_under_sirerag_imports_finetune():
    modules = sorted((ROOT / "sirerag").rglob("*.py"))
    assert len(modules) > 50 and ROOT / "sirerag" / "cli" / "main.py" in modules  # the CLI is walked too
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for path in modules for line, name in _imported_modules(ast.parse(path.read_text("utf-8")))
                 if name.split(".")[0] in FINETUNE_NAMES]
    assert offenders == []


def test_the_ast_check_sees_every_import_form():
    code = "import finetune\nfrom sirerag_finetune.cli import register\nimportlib.import_module('finetune.make_data')\n"
    assert [name for _, name in _imported_modules(ast.parse(code))] == [
        "finetune", "sirerag_finetune.cli", "finetune.make_data"]


def test_importing_the_core_and_its_cli_loads_no_finetune_module():
    code = ("import sys, sirerag, sirerag.pipeline.build, sirerag.extraction, sirerag.llm.factory, "
            "sirerag.cli.main as m; m.build_parser(commands={}); "
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('finetune', 'sirerag_finetune')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def _fake_distribution(site: Path, value: str) -> None:
    """A distribution on ``site`` whose only content is a ``sirerag.commands`` entry point."""
    info = site / "sirerag_fake_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sirerag-fake-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[sirerag.commands]\nhello = {value}\n")
    (site / "sirerag_fake_plugin.py").write_text(
        "def register(sub):\n"
        "    p = sub.add_parser('hello', help='a plugin command')\n"
        "    p.add_argument('name')\n"
        "    p.set_defaults(func=lambda args: print(f'hello {args.name}') or 0)\n")


def test_commands_are_discovered_from_entry_points(tmp_path, monkeypatch, capsys):
    from sirerag.cli.main import main, plugin_commands

    _fake_distribution(tmp_path, "sirerag_fake_plugin:register")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "hello" in plugin_commands()
    assert main(["hello", "world"]) == 0
    assert capsys.readouterr().out == "hello world\n"
    assert "sirerag_fake_plugin" in sys.modules  # loaded by discovery, not imported by name
    monkeypatch.delitem(sys.modules, "sirerag_fake_plugin")


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path, monkeypatch, caplog, capsys):
    from sirerag.cli.main import main, plugin_commands

    _fake_distribution(tmp_path, "sirerag_no_such_module:register")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "hello" not in plugin_commands()
    assert "sirerag command 'hello' (sirerag_no_such_module:register) could not be loaded" in caplog.text
    with pytest.raises(SystemExit, match="0"):
        main(["--help"])  # the core commands still work
    assert "build" in capsys.readouterr().out


def test_the_finetune_entry_point_is_declared_and_resolves():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    value = project["project"]["entry-points"]["sirerag.commands"]["finetune"]
    module, _, attr = value.partition(":")
    assert module == "sirerag_finetune.cli" and project["tool"]["setuptools"]["package-dir"] == {
        "sirerag_finetune": "finetune"}
    register = getattr(__import__(module, fromlist=[attr]), attr)
    from sirerag.cli.main import build_parser

    parser = build_parser(commands={"finetune": register})
    assert parser.parse_args(["finetune", "train", "--config", "c.toml", "--out", "o"]).finetune_command == "train"


def test_every_package_folder_is_listed_for_the_wheel():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "sirerag").rglob("*.py")}
    assert folders | {"sirerag_finetune"} == listed


def test_python_m_sirerag_finetune_runs_the_commands(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["sirerag_finetune", "--help"])
    with pytest.raises(SystemExit, match="0"):
        runpy.run_module("sirerag_finetune", run_name="__main__")
    out = capsys.readouterr().out
    assert "usage: sirerag finetune" in out and "make-data" in out
