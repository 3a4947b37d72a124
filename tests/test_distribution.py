"""What a user gets besides the package: the command line's help, the source distribution, the
changelog and the citation, consistent with each other."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

import bayes_loco
from bayes_loco import cli
from bayes_loco.experiments import STUDIES

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"bayes-loco {bayes_loco.__version__}"


@pytest.mark.parametrize("argv", [[], ["demo"], ["run"], ["compare"], ["plot"]])
def test_help_is_plain_text_with_a_description(argv, capsys):
    with pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text and ":class:" not in text, text
    description = text.split("\n\n")[1]
    assert len(description.split()) >= 5, f"{argv}: no description under the usage line:\n{text}"


def test_run_help_says_one_line_per_study(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    lines = capsys.readouterr().out.splitlines()
    for name, study in STUDIES.items():
        line = next((line for line in lines if line.split()[:1] == [name]), None)
        assert line is not None, f"run --help does not list {name}"
        assert study.description in line and len(line) <= 100, line


def test_the_sdist_holds_the_docs_notebooks_changelog_and_citation(tmp_path):
    build_meta = pytest.importorskip("setuptools.build_meta")
    import os

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        name = build_meta.build_sdist(str(tmp_path))
    finally:
        os.chdir(here)
    with tarfile.open(tmp_path / name) as archive:
        members = {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
    wanted = {"CHANGELOG.md", "CITATION.cff", "README.md", "LICENSE", "docs/index.md", "docs/design.md",
              "docs/conf.py", "docs/results/coverage.md", "docs/howto/own-data.md",
              "docs/reference/glossary.md", "notebooks/01_quickstart.ipynb",
              "notebooks/06_your_own_data.ipynb", "scripts/build_docs.sh", "bayes_loco/__init__.py"}
    assert wanted <= members, sorted(wanted - members)
    built = ("docs/_build", "docs/reference/generated", "notebooks/html")
    assert not any(m.startswith(built) for m in members)
    assert not any(m.startswith("docs/tutorials/") and m.endswith(".ipynb") for m in members)


def test_the_citation_and_the_changelog_agree_nothing_is_released():
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "date-released" not in citation
    assert re.search(rf"^version: {re.escape(bayes_loco.__version__)}$", citation, re.M)
    assert "arXiv:2412.19436" in citation
    # Keep a Changelog: one Unreleased section, each section type at most once in it
    assert re.findall(r"^## \[(.+?)\]", changelog, re.M) == ["Unreleased"]
    kinds = re.findall(r"^### (\w+)", changelog, re.M)
    assert len(kinds) == len(set(kinds)), kinds
    assert set(kinds) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
